"""Builds the `transposed` package; the gRPC stubs are generated from the repository's proto.

`pip install ./python` (from the repository root) runs protoc with grpc_python_plugin (or
grpc_tools.protoc) on
../proto/transposed/v1/transposed.proto (or $TRANSPOSED_PROTO_DIR/transposed/v1/transposed.proto)
into transposed/v1/ of the build. With $TRANSPOSED_LAUNCH_LIBRARY pointing at a built
libtransposed_launch.so, that library is copied into the package too; otherwise the package finds
it at run time (see transposed/_launch.py).
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def generate_stubs(out_dir):
    proto_dir = os.environ.get("TRANSPOSED_PROTO_DIR", os.path.join(HERE, "..", "proto"))
    proto = os.path.join(proto_dir, "transposed", "v1", "transposed.proto")
    if not os.path.isfile(proto):
        raise RuntimeError(f"transposed: the service definition {proto} is missing; build from the "
                           "repository (pip install ./python) or set TRANSPOSED_PROTO_DIR")
    os.makedirs(os.path.join(out_dir, "transposed", "v1"), exist_ok=True)
    args = [f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", proto]
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if protoc and plugin:
        # Debian: protobuf-compiler and protobuf-compiler-grpc (its grpc_tools' protoc is 3.5,
        # too old for proto3 `optional`).
        rc = subprocess.call([protoc, f"--plugin=protoc-gen-grpc_python={plugin}"] + args)
    else:
        from grpc_tools import protoc as grpc_protoc  # pip's grpcio-tools
        rc = grpc_protoc.main(["grpc_tools.protoc"] + args)
    if rc != 0:
        raise RuntimeError(f"protoc failed on {proto} ({rc})")
    open(os.path.join(out_dir, "transposed", "v1", "__init__.py"), "a").close()


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        generate_stubs(self.build_lib)
        lib = os.environ.get("TRANSPOSED_LAUNCH_LIBRARY")
        if lib:
            shutil.copy(lib, os.path.join(self.build_lib, "transposed", "libtransposed_launch.so"))


setup(cmdclass={"build_py": BuildPyWithStubs})
