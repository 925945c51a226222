"""cuda_library: compiles .cu files with nvcc (sm_80 + sm_90) and links them as a cc_library.

Where no toolkit was detected (see cuda_configure.bzl) the target is still defined, with no
CUDA sources and CUDA_AVAILABLE undefined, so dependents build CPU-only code paths.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "CUDA_PATH")

NVCC_FLAGS = (
    "-O3 -std=c++17 -Xcompiler -fPIC --expt-relaxed-constexpr " +
    "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
)

def cuda_library(name, cu_srcs, hdrs = [], cu_hdrs = [], deps = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc in genrules.

    Args:
      name: target name.
      cu_srcs: .cu files.
      hdrs: public headers (C++-includable).
      cu_hdrs: extra headers the .cu files include.
      deps: cc deps (their headers are visible to nvcc through -I.).
      **kwargs: passed to cc_library.
    """
    if not CUDA_AVAILABLE:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return
    objs = []
    for src in cu_srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = ("%s/bin/nvcc %s -DTAMP_HAVE_CUDA=1 -I. -I$(GENDIR) -c $(location %s) -o $@" %
                   (CUDA_PATH, NVCC_FLAGS, src)),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps,
        defines = ["TAMP_HAVE_CUDA=1"],
        includes = [],
        copts = ["-I%s/include" % CUDA_PATH],
        linkopts = ["-L%s/lib64" % CUDA_PATH, "-lcudart_static", "-lcublas", "-ldl", "-lrt", "-pthread"],
        **kwargs
    )
