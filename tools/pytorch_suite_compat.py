"""pytest plugin for tools/pytorch_suite.py: test files older than the installed torch
import a few helpers that torch 2.13 renamed or dropped. Each is put back under its old
name, only when missing, so the files run unedited; a copy of test/ from the installed
release needs none of it.
"""
import torch.testing._internal.common_cuda as common_cuda
import torch.testing._internal.common_methods_invocations as common_methods_invocations
import torch.testing._internal.common_nn as common_nn
import torch.testing._internal.common_utils as common_utils


def _alias(module, old, value):
    if not hasattr(module, old):
        setattr(module, old, value)


# Renamed (same decorator).
_alias(common_utils, "skipIfMps", common_utils.skipIfMPS)
# Removed; it only asked whether a CUDA GPU computes float32 matmuls in TF32: never here.
_alias(common_cuda, "tf32_is_not_fp32", lambda: False)
# Folded into get_new_module_tests(); the old list only generated the device-less TestNN
# cases, which the suite does not select (test_nn runs with -k TestNNDeviceType).
_alias(common_nn, "new_module_tests", [])
# binary_ufuncs now holds the ops and their refs, what the old name meant.
_alias(common_methods_invocations, "binary_ufuncs_and_refs", common_methods_invocations.binary_ufuncs)

# Under torch 2.13 the old test_nn.py defines some tests twice for the CPU (its dtype
# decorators overlap there), and instantiation stops the whole file at the second one
# ("Redefinition of test test_activations_bfloat16_cpu"), so no CPU twin of test_nn
# could run. The first definition is kept and instantiation goes on.
import torch.testing._internal.common_device_type as _common_device_type  # noqa: E402

_instantiate_test = _common_device_type.DeviceTypeTestBase.instantiate_test.__func__


def _instantiate_test_keeping_the_first(cls, name, test, *, generic_cls=None):
    try:
        return _instantiate_test(cls, name, test, generic_cls=generic_cls)
    except AssertionError as e:
        if "Redefinition of test" not in str(e):
            raise


_common_device_type.DeviceTypeTestBase.instantiate_test = classmethod(
    _instantiate_test_keeping_the_first)
