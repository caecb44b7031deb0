"""Compatibility alias for OpenNeuron under the name of AWS's TorchNeuron package.

Transformers, Accelerate, Diffusers and TRL switch on their Neuron code paths when
`importlib.util.find_spec("torch_neuronx")` succeeds and `torch.neuron.is_available()`
is true. This module lets those paths run on OpenNeuron unchanged. It is not AWS's
package: do not install OpenNeuron in an environment that has AWS's torch-neuronx.
"""

import openneuron as _openneuron
from openneuron import *  # noqa: F401,F403
from openneuron import __version__  # noqa: F401

_openneuron._load()
