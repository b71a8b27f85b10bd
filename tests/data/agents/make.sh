#!/usr/bin/env bash
# Regenerates the sessions under tests/data/agents/sessions/: each is written by the real agent
# (run by tests/integration/peers/agent_oracle.py in a private network namespace against the
# scripted local provider), some with the agent killed (SIGKILL) at a chosen moment. Needs
# $TRANSCRIPTD_CLAUDE (2.1.332), $TRANSCRIPTD_CLAUDE_2_0 (2.0.77, cli.js) and $TRANSCRIPTD_CODEX
# (0.171.0) and $TRANSCRIPTD_COPILOT (1.0.102), as .ci/run installs them. See PROVENANCE.md.
# `make.sh copilot` (or claude, codex, gemini) regenerates only that agent's sessions.
set -euo pipefail
only=${1:-all}
cd "$(dirname "$0")"
O=../../integration/peers/agent_oracle.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rec() { # name agent bin args...
  local name=$1 agent=$2 bin=$3; shift 3
  python3 "$O" record --agent "$agent" --bin "$bin" --out "$tmp/$name" "$@" >/dev/null
  mkdir -p "sessions/$(dirname "$name")"
  cp "$tmp/$name/session.jsonl" "sessions/$name.jsonl"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], "exit", r["exit"], "killed", r["killed"], "scratch", r["scratch"])' "$tmp/$name/result.json" "$name"
}
if [[ $only == all || $only == claude ]]; then
for v in 2.1.332 2.0.77; do
  bin=$TRANSCRIPTD_CLAUDE; [[ $v == 2.0.77 ]] && bin=$TRANSCRIPTD_CLAUDE_2_0
  rec "claude-$v/echo" claude "$bin" --script scripts/echo.json
  rec "claude-$v/killed-mid-tool" claude "$bin" --script scripts/sleep.json --kill-at mid-tool
  rec "claude-$v/killed-mid-stream" claude "$bin" --script scripts/stall.json --kill-at mid-stream
  rec "claude-$v/compacted" claude "$bin" --script scripts/echo.json --resume "sessions/claude-$v/echo.jsonl" --prompt /compact
  rec "claude-$v/killed-during-compaction" claude "$bin" --script scripts/echo.json --resume "sessions/claude-$v/echo.jsonl" --prompt /compact --kill-at compaction
  rec "claude-$v/resumed-after-kill-mid-tool" claude "$bin" --script scripts/echo.json --resume "sessions/claude-$v/killed-mid-tool.jsonl" --prompt "Go on."
done
fi
if [[ $only == all || $only == codex ]]; then
rec codex-0.171.0/echo codex "$TRANSCRIPTD_CODEX" --script scripts/codex-echo.json
rec codex-0.171.0/killed-mid-tool codex "$TRANSCRIPTD_CODEX" --script scripts/codex-sleep.json --kill-at mid-tool
rec codex-0.171.0/resumed-after-kill-mid-tool codex "$TRANSCRIPTD_CODEX" --script scripts/codex-echo.json --resume sessions/codex-0.171.0/killed-mid-tool.jsonl --prompt "Go on."
fi
if [[ $only == all || $only == gemini ]]; then
# Gemini CLI 0.61.0 ($TRANSCRIPTD_GEMINI: the bundle's gemini.js, run by $TRANSCRIPTD_NODE).
rec gemini-cli-0.61.0/echo gemini "$TRANSCRIPTD_GEMINI" --script scripts/gemini-echo.json
rec gemini-cli-0.61.0/killed-mid-tool gemini "$TRANSCRIPTD_GEMINI" --script scripts/gemini-sleep.json --kill-at mid-tool
rec gemini-cli-0.61.0/killed-mid-stream gemini "$TRANSCRIPTD_GEMINI" --script scripts/gemini-stall.json --kill-at mid-stream
rec gemini-cli-0.61.0/resumed-after-kill-mid-tool gemini "$TRANSCRIPTD_GEMINI" --script scripts/gemini-echo.json --resume sessions/gemini-cli-0.61.0/killed-mid-tool.jsonl --prompt "Go on."
fi
if [[ $only == all || $only == copilot ]]; then
  c=copilot-1.0.102
  rec $c/echo copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-echo.json
  rec $c/killed-mid-tool copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-sleep.json --kill-at mid-tool
  rec $c/killed-mid-stream copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-stall.json --kill-at mid-stream
  rec $c/resumed-after-kill-mid-tool copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-echo.json --resume sessions/$c/killed-mid-tool.jsonl --prompt "Go on."
  rec $c/compacted copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-echo.json --resume sessions/$c/resumed-after-kill-mid-tool.jsonl --prompt /compact
  rec $c/after-compaction copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-echo.json --resume sessions/$c/compacted.jsonl --prompt "After it."
  rec $c/killed-during-compaction copilot "$TRANSCRIPTD_COPILOT" --script scripts/copilot-echo.json --resume sessions/$c/after-compaction.jsonl --prompt /compact --kill-at compaction
fi
