"""Repository rule: detects a CUDA toolkit so CUDA targets build only where nvcc exists.

Generates @<name>//:defs.bzl with CUDA_AVAILABLE and CUDA_PATH. The toolkit path comes from
$CUDA_PATH, else /usr/local/cuda. Setting TAMP_DISABLE_CUDA=1 forces a CPU-only build.

Where the toolkit is found it also generates, in @<name>//:BUILD,
  :cuda_headers  the toolkit's C++ headers (include/*.h, crt/, nv/), declared so that host
                 C++ code may include <cuda_runtime_api.h> and <cublas_v2.h> under Bazel's
                 header-inclusion check. nvcc finds its own headers (CUB/CCCL included).
  :cudart        the CUDA runtime, libcudart.so.13 (shared: test binaries link the
                 project's libraries as shared objects, and a static runtime in the binary
                 would not resolve their references).
  :cublas        cuBLAS, libcublas.so.13 and libcublasLt.so.13.
Shared libraries are found at run time through an rpath to the toolkit's lib64, or on a
machine without the toolkit through LD_LIBRARY_PATH (bench/gpu/run_on_device.sh).
Without a toolkit these targets exist but are empty, so BUILD files need no conditionals.
"""

def _cuda_configure_impl(repository_ctx):
    cuda_path = repository_ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    disabled = repository_ctx.os.environ.get("TAMP_DISABLE_CUDA", "0") == "1"
    available = (not disabled) and repository_ctx.path(cuda_path + "/bin/nvcc").exists
    lib = cuda_path + "/lib64"
    if available:
        repository_ctx.symlink(cuda_path + "/include", "include")
        build = """\
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl"])

cc_library(
    name = "cuda_headers",
    hdrs = glob([
        "include/*.h",
        "include/*.hpp",
        "include/crt/**",
        "include/nv/**",
    ]),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart", "-ldl", "-lrt", "-pthread"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cublas",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas", "-lcublasLt"],
    deps = [":cudart"],
)
""".format(lib = lib)
    else:
        build = """\
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl"])

cc_library(name = "cuda_headers")

cc_library(name = "cudart")

cc_library(name = "cublas")
"""
    repository_ctx.file("BUILD", build)
    repository_ctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nCUDA_PATH = \"%s\"\n" % (
        "True" if available else "False",
        cuda_path,
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "TAMP_DISABLE_CUDA"],
    local = True,
)
