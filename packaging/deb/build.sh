#!/usr/bin/env bash
# Builds the Debian package of transcriptd with cargo-deb (`cargo install --locked
# cargo-deb@3.8.0`, as .ci/run does), from a binary already built; nothing is published.
#
#   packaging/deb/build.sh [BINARY] [OUTDIR]
#
# BINARY defaults to target/release/transcriptd (built with `cargo build --release --locked` if
# absent); OUTDIR to target/debian. The package ([package.metadata.deb] in Cargo.toml) holds
# /usr/bin/transcriptd, the systemd unit of deploy/systemd with /usr/bin paths (installed, not
# enabled), its sysusers.d file (the postinst creates the user) and configuration
# (/etc/transcriptd/transcriptd.toml, a conffile), a manual page per verb and the bash, zsh and
# fish completions. Install with `dpkg -i` (docs/install.md). Tested by
# tests/integration/packaging.rs.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$repo/target/release/transcriptd}"
out="${2:-$repo/target/debian}"
if [[ ! -e "$bin" && $# -lt 1 ]]; then
  (cd "$repo" && cargo build --release --locked --bin transcriptd)
fi
[[ -x "$bin" ]] || { echo "packaging/deb/build.sh: $bin is not an executable" >&2; exit 2; }
cargo deb --version >/dev/null 2>&1 || { echo "packaging/deb/build.sh: needs cargo-deb: cargo install --locked cargo-deb@3.8.0" >&2; exit 2; }
for tool in strip gzip; do
  command -v "$tool" >/dev/null || { echo "packaging/deb/build.sh: needs $tool" >&2; exit 2; }
done

# The staging directory the assets in Cargo.toml name (relative to the repository, whatever
# CARGO_TARGET_DIR says).
stage="$repo/target/packaging/deb/stage"
rm -rf "$stage"
mkdir -p "$stage/man" "$stage/completions" "$out"
# Stripped as Debian binaries are (policy 10.1; a panic aborts, so no backtrace needs symbols).
strip --strip-unneeded -o "$stage/transcriptd" "$bin"
chmod 0755 "$stage/transcriptd"
# The unit of deploy/systemd runs /usr/local/bin/transcriptd (an install by hand); the package's
# binary is /usr/bin/transcriptd.
sed 's|/usr/local/bin/transcriptd|/usr/bin/transcriptd|g' "$repo/deploy/systemd/transcriptd.service" >"$stage/transcriptd.service"
! grep -q /usr/local "$stage/transcriptd.service" || { echo "packaging/deb/build.sh: the unit still names /usr/local" >&2; exit 2; }
# The Debian changelog the package must carry: one entry for this version, dated by the last
# commit (reproducible), or by SOURCE_DATE_EPOCH.
version="$("$stage/transcriptd" --version | sed 's/^transcriptd //')"
when="${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}"
cat >"$stage/changelog" <<CHANGELOG
transcriptd ($version-1) unstable; urgency=medium

  * Built from the repository by packaging/deb/build.sh (unofficial).

 -- transcriptd developers <transcriptd@packages.invalid>  $(date -u -R -d "@$when")
CHANGELOG
"$stage/transcriptd" man --dir "$stage/man"
gzip -9n "$stage"/man/*.1
"$stage/transcriptd" completions bash >"$stage/completions/transcriptd"
"$stage/transcriptd" completions zsh >"$stage/completions/_transcriptd"
"$stage/transcriptd" completions fish >"$stage/completions/transcriptd.fish"

cd "$repo"
cargo deb --no-build --locked --fast --no-strip --output "$out"
