"""Repository rule: detects a CUDA toolkit so CUDA targets build only where nvcc exists.

Generates @<name>//:defs.bzl with CUDA_AVAILABLE and CUDA_PATH. The toolkit path comes from
$CUDA_PATH, else /usr/local/cuda. Setting TAMP_DISABLE_CUDA=1 forces a CPU-only build.
"""

def _cuda_configure_impl(repository_ctx):
    cuda_path = repository_ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    disabled = repository_ctx.os.environ.get("TAMP_DISABLE_CUDA", "0") == "1"
    available = (not disabled) and repository_ctx.path(cuda_path + "/bin/nvcc").exists
    repository_ctx.file("BUILD", "exports_files([\"defs.bzl\"])\n")
    repository_ctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nCUDA_PATH = \"%s\"\n" % (
        "True" if available else "False",
        cuda_path,
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "TAMP_DISABLE_CUDA"],
    local = True,
)
