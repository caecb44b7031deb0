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
