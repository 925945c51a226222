"""cuda_library: compiles .cu files with nvcc (sm_80, sm_90 + PTX) and links them as a cc_library.

    cuda_library(
        name = "layers",
        cu_srcs = ["layers.cu"],          # nvcc, once per file, both architectures
        srcs = ["layers.cc"],             # plain C++ (gcc) host code: CUDA runtime/cuBLAS calls
        hdrs = ["layers.h"],
        cu_hdrs = ["internal/bits.cuh"],  # headers only the .cu files include
        deps = [...],                     # cc deps; their headers are visible to nvcc too
        nvcc_copts = ["--fmad=false"],    # extra nvcc flags for this target's .cu files
    )

nvcc sees the declared headers of `deps` (transitively) with their include paths and
defines, so .cu files may include project headers such as base/philox.h. Keep .cu files
free of Abseil/glog: nvcc compiles slowly and host-side Status code belongs in `srcs`.

With --config=cuda_lineinfo (.bazelrc) nvcc also gets -lineinfo: line tables for the device
code, so compute-sanitizer reports and profiles name source lines. It changes no generated
instruction; bench/gpu/run_on_device.sh packs the device binaries with it.

Every cuda_library defines TAMP_HAVE_CUDA=1 for itself and its dependents and depends on
@local_cuda//:cudart (the runtime; add @local_cuda//:cublas where cuBLAS is used).

Where no toolkit was detected (tools/cuda_configure.bzl; TAMP_DISABLE_CUDA=1 forces this)
the target is still defined, without the .cu objects and without TAMP_HAVE_CUDA: `srcs`
are still compiled, so they (and the tests of CUDA code) must guard CUDA code with
`#if TAMP_HAVE_CUDA`. Dependents then build their CPU-only paths.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "CUDA_PATH")

NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "-Xcompiler",
    "-fPIC",
    "--expt-relaxed-constexpr",
    "-gencode",
    "arch=compute_80,code=sm_80",
    "-gencode",
    "arch=compute_90,code=[sm_90,compute_90]",  # + PTX, so newer GPUs can JIT it.
    "-DTAMP_HAVE_CUDA=1",
]

def _keep_include(path):
    # The toolkit's own include directory is nvcc's already; skip the symlinked copy.
    return not path.startswith("external/local_cuda")

def _nvcc_objects_impl(ctx):
    infos = [dep[CcInfo] for dep in ctx.attr.deps if CcInfo in dep]
    context = cc_common.merge_cc_infos(cc_infos = infos).compilation_context
    headers = depset(ctx.files.hdrs, transitive = [context.headers])

    flags = list(NVCC_FLAGS) + ctx.attr.nvcc_copts
    flags += ["-I.", "-I" + ctx.bin_dir.path, "-I" + ctx.genfiles_dir.path]

    for path in context.includes.to_list():
        if _keep_include(path):
            flags += ["-I" + path]
    for path in context.quote_includes.to_list():
        if _keep_include(path) and path != ".":
            flags += ["-I" + path]
    for path in context.system_includes.to_list():
        if _keep_include(path):
            flags += ["-isystem", path]
    for define in context.defines.to_list():
        flags += ["-D" + define]

    outs = []
    for src in ctx.files.cu_srcs:
        stem = src.basename[:-len(src.extension) - 1]
        obj = ctx.actions.declare_file("_nvcc/%s/%s.o" % (ctx.label.name, stem))
        ctx.actions.run_shell(
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            command = '"$1" "${@:4}" -c "$2" -o "$3"',
            arguments = [ctx.attr.nvcc, src.path, obj.path] + flags,
            use_default_shell_env = True,
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
        )
        outs.append(obj)
    return [DefaultInfo(files = depset(outs))]

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "cu_srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "nvcc": attr.string(),
        "nvcc_copts": attr.string_list(),
    },
)

def cuda_library(name, cu_srcs = [], srcs = [], hdrs = [], cu_hdrs = [], deps = [],
                 nvcc_copts = [], defines = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc (see the file comment).

    Args:
      name: target name.
      cu_srcs: .cu files, compiled by nvcc.
      srcs: C++ sources compiled by the C++ toolchain, with CUDA's headers available.
      hdrs: public headers.
      cu_hdrs: extra headers (e.g. .cuh) that only the .cu files include.
      deps: cc deps.
      nvcc_copts: extra nvcc flags.
      defines: as for cc_library (TAMP_HAVE_CUDA=1 is added when CUDA is available).
      **kwargs: passed to cc_library.
    """
    if not CUDA_AVAILABLE:
        native.cc_library(
            name = name,
            srcs = srcs,
            hdrs = hdrs,
            deps = deps,
            defines = defines,
            **kwargs
        )
        return
    cuda_deps = deps + ["@local_cuda//:cudart", "@local_cuda//:cuda_headers"]
    objects = []
    if cu_srcs:
        _nvcc_objects(
            name = name + "_nvcc",
            cu_srcs = cu_srcs,
            hdrs = hdrs + cu_hdrs,
            deps = cuda_deps,
            nvcc = CUDA_PATH + "/bin/nvcc",
            nvcc_copts = nvcc_copts + select({
                "//tools:cuda_lineinfo": ["-lineinfo"],
                "//conditions:default": [],
            }),
            visibility = ["//visibility:private"],
            tags = kwargs.get("tags", []),
            testonly = kwargs.get("testonly", False),
        )
        objects = [":" + name + "_nvcc"]
    native.cc_library(
        name = name,
        srcs = srcs + objects,
        hdrs = hdrs,
        deps = cuda_deps,
        defines = defines + ["TAMP_HAVE_CUDA=1"],
        **kwargs
    )
