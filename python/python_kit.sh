#!/usr/bin/env bash
# The Python extension for another Python than Debian 12's 3.11 (the GPU machine's 3.12,
# whose headers no Debian 12 package has): everything but the Python layer comes prebuilt.
#
#   python/python_kit.sh pack DIR    # here: bazel build; DIR gets the link's objects and
#                                    # libraries, the headers binding.cc and tensor_arg.cc
#                                    # include, those two sources and the package's .py files
#   DIR/build.sh                     # anywhere with g++, pybind11 and the Python's headers:
#                                    # compiles the two sources for ${PYTHON:-python3} and
#                                    # links them with the kit into DIR/tamp/_tamp<suffix>.so;
#                                    # then PYTHONPATH=DIR imports it (it finds DIR/lib, or
#                                    # KIT_LIB_DIR where build.sh took the libraries from)
#
# The objects are those of the extension's own link (bazel aquery: _tamp.so's params file,
# less binding's and tensor_arg's objects), so the kit is the same code as _tamp.so; the
# libraries are those _tamp.so loads (ldd), linked by path so that the extension names
# them as they are named here. BAZEL_FLAGS adds flags to the build (e.g. a CUDA config).
set -euo pipefail
cd "$(dirname "$0")/.."

pack() {
  local kit="$1"
  local target=//python:tamp/_tamp.so
  # shellcheck disable=SC2086  # BAZEL_FLAGS: words.
  bazel build -c opt ${BAZEL_FLAGS:-} "$target"
  local root params
  root="$(bazel info -c opt ${BAZEL_FLAGS:-} execution_root)"
  params="$(bazel aquery -c opt ${BAZEL_FLAGS:-} "mnemonic(\"CppLink\", $target)" --output=text |
    grep -o 'bazel-out/[^ ]*_tamp\.so-[0-9]*\.params' | head -1)"
  [ -n "$params" ] || { echo "python_kit: no link params for $target" >&2; return 1; }
  rm -rf "$kit"
  mkdir -p "$kit/objs" "$kit/include" "$kit/lib" "$kit/tamp"
  # Objects and linker flags, less the output, the Python layer's objects and the -l flags
  # (the libraries come by path below).
  local line
  : > "$kit/link.params"
  while IFS= read -r line; do
    case "$line" in
      -shared | -o | */_tamp.so | -l* | -fuse-ld=* | -B*) ;;
      */binding.pic.o | */tensor_arg.pic.o) ;;
      bazel-out/*)
        mkdir -p "$kit/objs/$(dirname "$line")"
        cp "$root/$line" "$kit/objs/$line"
        echo "objs/$line" >> "$kit/link.params" ;;
      *) echo "$line" >> "$kit/link.params" ;;
    esac
  done < "$root/$params"
  # The shared libraries the extension loads, but the C and C++ runtimes, the driver and
  # cuBLAS, which the other machine has.
  ldd "bazel-bin/python/tamp/_tamp.so" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | \
          libcublas* | libgcc_s.so* | libstdc++.so*) ;;
        *) cp -L "$lib" "$kit/lib/"
           echo "lib/$(basename "$lib")" >> "$kit/link.params" ;;
      esac
    done
  # Headers: every one the two sources include, but the Python's, pybind11's and the C and
  # C++ libraries' (the other machine brings its own), under their include paths.
  local header
  g++ -std=c++17 -M -I. -Ibazel-bin -isystem /usr/include/python3.11 \
      python/binding.cc python/tensor_arg.cc | tr ' \\' '\n\n' | grep -E '\.(h|hpp|inc)$' |
    sort -u | while read -r header; do
      local relative
      case "$header" in
        /usr/include/absl/* | /usr/include/google/* | /usr/include/grpc/* | \
          /usr/include/grpcpp/* | /usr/include/grpc++/* | /usr/include/Random123/* | \
          /usr/include/glog/* | /usr/include/gflags/*) relative="${header#/usr/include/}" ;;
        /*) continue ;;
        bazel-bin/*) relative="${header#bazel-bin/}" ;;
        *) relative="$header" ;;
      esac
      mkdir -p "$kit/include/$(dirname "$relative")"
      cp -L "$header" "$kit/include/$relative"
    done
  cp python/binding.cc python/tensor_arg.cc "$kit/"
  cp python/tamp/*.py "$kit/tamp/"
  cat > "$kit/build.sh" <<'BUILD'
#!/usr/bin/env bash
# Builds tamp/_tamp<suffix>.so for ${PYTHON:-python3} from this kit (python/python_kit.sh).
set -euo pipefail
cd "$(dirname "$0")"
python="${PYTHON:-python3}"
include="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
# pybind11's headers: the Python's package (pip's pybind11), else Debian's pybind11-dev.
pybind="$("$python" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null ||
          echo /usr/include)"
[ -f "$pybind/pybind11/pybind11.h" ] || { echo "build.sh: no pybind11 headers" >&2; exit 1; }
suffix="$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
[ -f "$include/Python.h" ] || { echo "build.sh: no Python.h in $include" >&2; exit 1; }
flags=(-std=c++17 -O2 -DNDEBUG -fPIC -fvisibility=hidden -march=x86-64-v2 -Iinclude
       -isystem "$include")
[ "$pybind" = /usr/include ] || flags+=(-isystem "$pybind")  # A default path stays last.
g++ "${flags[@]}" -c binding.cc -o binding.o
g++ "${flags[@]}" -c tensor_arg.cc -o tensor_arg.o
# The libraries: lib/, or KIT_LIB_DIR (a folder that holds the same files). The objects'
# groups (--start-lib) are gold's; without gold, every object is linked.
libdir="$(cd "${KIT_LIB_DIR:-lib}" && pwd)"
sed "s|^lib/|$libdir/|" link.params > link.use.params
if ! command -v ld.gold > /dev/null; then
  grep -v -e '--start-lib' -e '--end-lib' link.use.params > link.plain.params
  mv link.plain.params link.use.params
  link=(@link.use.params)
else
  link=(-fuse-ld=gold @link.use.params)
fi
g++ -shared -o "tamp/_tamp$suffix" binding.o tensor_arg.o "${link[@]}" -Wl,-rpath,"$libdir"
echo "build.sh: tamp/_tamp$suffix for $("$python" --version 2>&1)"
BUILD
  chmod +x "$kit/build.sh"
  echo "python_kit: $kit ($(du -sh "$kit" | cut -f1)): $(wc -l < "$kit/link.params") link" \
       "arguments, $(find "$kit/include" -type f | wc -l) headers"
}

case "${1:-}" in
  pack) [ $# -eq 2 ] || { echo "usage: $0 pack DIR" >&2; exit 2; }; pack "$2" ;;
  *) echo "usage: $0 pack DIR" >&2; exit 2 ;;
esac
