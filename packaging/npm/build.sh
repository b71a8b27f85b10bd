#!/usr/bin/env bash
# Builds the npm packages of transcriptd as local tarballs (nothing is published):
#   transcriptd-VERSION.tgz               the `transcriptd` command: a Node launcher
#                                         (transcriptd/bin/transcriptd.js) that runs the binary of
#   transcriptd-linux-x64-VERSION.tgz     the per-platform package (`os`/`cpu`/`libc` fields), the
#                                         main package's optional dependency
#
#   packaging/npm/build.sh [BINARY] [OUTDIR]
#
# BINARY defaults to target/release/transcriptd (built with `cargo build --release --locked` if
# absent); a copy of it, without its debug sections, goes into the platform package. OUTDIR
# defaults to target/packaging/npm. Install offline and run (docs/install.md):
#   npm install ./transcriptd-linux-x64-VERSION.tgz ./transcriptd-VERSION.tgz && npx transcriptd doctor
# Tested by tests/integration/packaging.rs.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$repo/target/release/transcriptd}"
out="${2:-$repo/target/packaging/npm}"
if [[ ! -e "$bin" && $# -lt 1 ]]; then
  (cd "$repo" && cargo build --release --locked --bin transcriptd)
fi
[[ -x "$bin" ]] || { echo "packaging/npm/build.sh: $bin is not an executable" >&2; exit 2; }
for tool in npm strip; do
  command -v "$tool" >/dev/null || { echo "packaging/npm/build.sh: needs $tool" >&2; exit 2; }
done

# The version and description are Cargo.toml's, read by cargo itself.
meta="$(cd "$repo" && cargo metadata --format-version 1 --no-deps --locked)"
field() { node -e 'const m = JSON.parse(require("fs").readFileSync(0, "utf8")); process.stdout.write(m.packages.find(p => p.name === "transcriptd")[process.argv[1]])' "$1" <<<"$meta"; }
version="$(field version)"
description="$(field description)"
# The binary's own platform, in Node's words (process.platform, process.arch).
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) os=linux cpu=x64 ;;
  Linux-aarch64) os=linux cpu=arm64 ;;
  *) echo "packaging/npm/build.sh: no npm platform name for $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac
platform="$os-$cpu"
[[ "$platform" == linux-x64 ]] || echo "packaging/npm/build.sh: note: the transcriptd package names only transcriptd-linux-x64 as its optional dependency" >&2

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
fill() { sed -e "s|@VERSION@|$version|g" -e "s|@DESCRIPTION@|$description|g" -e "s|@PLATFORM@|$platform|g" -e "s|@OS@|$os|g" -e "s|@CPU@|$cpu|g" "$1"; }

mkdir -p "$stage/main/bin" "$stage/platform/bin" "$out"
fill "$repo/packaging/npm/transcriptd/package.json" >"$stage/main/package.json"
install -m 0755 "$repo/packaging/npm/transcriptd/bin/transcriptd.js" "$stage/main/bin/transcriptd.js"
cp "$repo/README.md" "$stage/main/README.md"
fill "$repo/packaging/npm/platform/package.json" >"$stage/platform/package.json"
# Debug sections out (a debug build is 10 times larger with them); symbols kept for backtraces.
strip --strip-debug -o "$stage/platform/bin/transcriptd" "$bin"
chmod 0755 "$stage/platform/bin/transcriptd"
"$stage/platform/bin/transcriptd" --version >/dev/null

for p in platform main; do
  (cd "$stage/$p" && npm pack --silent --pack-destination "$out" >/dev/null)
done
ls "$out/transcriptd-$version.tgz" "$out/transcriptd-$platform-$version.tgz"
