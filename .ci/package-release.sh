#!/usr/bin/env bash
# .ci/package-release.sh TARGET VERSION OUT_DIR [BINARY]
#
# Packs one release binary as the zip that rokit, aftman and foreman find on a GitHub
# release, and that `cargo binstall` fetches ([package.metadata.binstall] in Cargo.toml):
#   OUT_DIR/studio-bridge-<VERSION>-<os>-<arch>.zip   (os: windows|macos|linux,
#                                                     arch: x86_64|aarch64)
# holding the binary alone at its top level (studio-bridge, or studio-bridge.exe on
# Windows), and OUT_DIR/<that zip>.sha256 (`<hex>  <name>`, as sha256sum writes it; the
# release job joins them into SHA256SUMS).
#
# TARGET is the Rust target triple; VERSION the tag without its `v`, and it must be
# Cargo.toml's version (binstall builds the URL from the crate's version). BINARY
# defaults to target/TARGET/release/studio-bridge[.exe], what `cargo build --release
# --target TARGET` makes; `.ci/run` passes the debug binary its tests already built, to
# dry-run this packaging without a release build.
#
# Then it checks what it made: the archive's name, that it holds exactly the one binary,
# with its executable bit, and, when TARGET is this machine's, that the unpacked binary
# runs and says VERSION. Runs under bash on Linux, macOS and Windows (Git Bash); the zip
# is written by Python's zipfile, there on every GitHub runner and on CI's machine, at
# deflate level 9 (ZIP_LEVEL=1 for a quick dry run of a 190 MB debug binary).
set -euo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 TARGET VERSION OUT_DIR [BINARY]" >&2
  exit 2
fi
target=$1
version=${2#v}
out_dir=$3
cd "$(dirname "$0")/.."

fail() {
  echo "package-release: $*" >&2
  exit 1
}

case "$target" in
  x86_64-*) arch=x86_64 ;;
  aarch64-*) arch=aarch64 ;;
  *) fail "no release archive for the architecture of $target (x86_64 or aarch64)" ;;
esac
case "$target" in
  *-pc-windows-msvc) os=windows exe=.exe ;;
  *-apple-darwin) os=macos exe= ;;
  *-unknown-linux-gnu) os=linux exe= ;;
  *) fail "no release archive for $target (windows-msvc, apple-darwin, linux-gnu)" ;;
esac

crate_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
if [ "$version" != "$crate_version" ]; then
  fail "version $version is not Cargo.toml's $crate_version: tag the commit whose Cargo.toml says it (v$crate_version)"
fi

binary=${4:-target/$target/release/studio-bridge$exe}
[ -f "$binary" ] || fail "$binary does not exist: cargo build --release --locked --target $target"

python=
for candidate in python3 python; do
  # On Windows `python3` may be the Store's stub, which runs nothing: ask for zipfile.
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import zipfile, hashlib' 2>/dev/null; then
    python=$candidate
    break
  fi
done
[ -n "$python" ] || fail "Python 3 is needed to write the zip"

name="studio-bridge-$version-$os-$arch.zip"
inner="studio-bridge$exe"
mkdir -p "$out_dir"
archive="$out_dir/$name"
rm -f "$archive" "$archive.sha256"

"$python" - "$binary" "$inner" "$archive" "${ZIP_LEVEL:-9}" <<'PY'
import hashlib, os, sys, zipfile
binary, inner, archive, level = sys.argv[1:]
info = zipfile.ZipInfo.from_file(binary, arcname=inner)
info.external_attr = (0o100755 << 16)  # a regular file, rwxr-xr-x, whatever the build host said
info.compress_type = zipfile.ZIP_DEFLATED
with open(binary, "rb") as src, zipfile.ZipFile(archive, "w") as zf:
    zf.writestr(info, src.read(), compresslevel=int(level))
digest = hashlib.sha256(open(archive, "rb").read()).hexdigest()
with open(archive + ".sha256", "w", newline="\n") as f:
    f.write(f"{digest}  {os.path.basename(archive)}\n")
PY

# The checks: what a tool manager will see when it opens the archive.
case "$(basename "$archive")" in
  studio-bridge-[0-9]*-windows-x86_64.zip | studio-bridge-[0-9]*-macos-x86_64.zip | \
    studio-bridge-[0-9]*-macos-aarch64.zip | studio-bridge-[0-9]*-linux-x86_64.zip | \
    studio-bridge-[0-9]*-linux-aarch64.zip) ;;
  *) fail "$archive is not named studio-bridge-<version>-<windows|macos|linux>-<x86_64|aarch64>.zip" ;;
esac
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
"$python" - "$archive" "$inner" "$binary" "$unpacked" <<'PY' || fail "$archive does not hold what it should"
import os, sys, zipfile
archive, inner, binary, unpacked = sys.argv[1:]
with zipfile.ZipFile(archive) as zf:
    if zf.testzip() is not None:
        sys.exit(f"{archive}: a damaged member")
    names = zf.namelist()
    if names != [inner]:
        sys.exit(f"{archive} holds {names}, not [{inner!r}] alone")
    member = zf.getinfo(inner)
    if (member.external_attr >> 16) & 0o111 != 0o111:
        sys.exit(f"{archive}: {inner} is not executable")
    if member.file_size != os.path.getsize(binary):
        sys.exit(f"{archive}: {inner} is {member.file_size} bytes, the binary {os.path.getsize(binary)}")
    zf.extract(inner, unpacked)
    os.chmod(os.path.join(unpacked, inner), 0o755)
PY

host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || true)
if [ "$host" = "$target" ]; then
  said=$("$unpacked/$inner" --version) || fail "the unpacked $inner does not run"
  # `studio-bridge <version>`, then what it bundles (e.g. ` (Luau 0.740)`).
  case "$said" in
    "studio-bridge $version" | "studio-bridge $version "*) ;;
    *) fail "the unpacked $inner says '$said', not 'studio-bridge $version'" ;;
  esac
  ran=", runs: $said"
else
  ran=" (built for $target on $host: not run here)"
fi
echo "packaged $archive: $inner alone, executable$ran; sha256 $(cut -d' ' -f1 "$archive.sha256")"
