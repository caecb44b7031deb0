"""Builds the C++ extension with CMake (the same build tree `make` uses)."""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.join(ROOT, "build", "release")


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        subprocess.check_call(
            ["cmake", "-S", ROOT, "-B", BUILD_DIR, "-G", "Ninja",
             f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"]
        )
        subprocess.check_call(["cmake", "--build", BUILD_DIR, "--target", "openneuron_C"])
        built = [f for f in os.listdir(os.path.join(ROOT, "python", "openneuron"))
                 if f.startswith("_C.") and f.endswith(".so")]
        if not built:
            raise RuntimeError("CMake did not produce python/openneuron/_C*.so")
        src = os.path.join(ROOT, "python", "openneuron", built[0])
        dst = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copyfile(src, dst)


setup(ext_modules=[CMakeExtension("openneuron._C")], cmdclass={"build_ext": CMakeBuild})
