#!/usr/bin/env python3
"""Reduces LiteLLM's model_prices_and_context_window.json to the table transcriptd ships.

Usage: tools/prices/reduce.py UPSTREAM.json > src/prices/prices.json

Keeps the chat models of the families the agents run (Claude, OpenAI's GPT, o-series and Codex,
Gemini), under every provider LiteLLM files them under (so Bedrock and Vertex names resolve as
ccusage resolves them), and of each only the per-token prices transcriptd uses. The order is
upstream's (the lookup breaks ties by it). Record the source and date in src/prices/PROVENANCE.md.
"""
import json
import re
import sys

FIELDS = [
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_creation_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
    "cache_read_input_token_cost",
    "input_cost_per_token_above_200k_tokens",
    "output_cost_per_token_above_200k_tokens",
    "cache_creation_input_token_cost_above_200k_tokens",
    "cache_read_input_token_cost_above_200k_tokens",
]
FAMILY = re.compile(r"claude|gpt-|codex|gemini|(^|/)o[134](-|$)", re.I)
MODES = {"chat", "responses", "completion"}


def main(path):
    with open(path) as f:
        upstream = json.load(f)
    out = {}
    for name, entry in upstream.items():
        if name == "sample_spec" or not isinstance(entry, dict) or not FAMILY.search(name):
            continue
        if entry.get("mode", "chat") not in MODES:
            continue
        kept = {k: entry[k] for k in FIELDS if isinstance(entry.get(k), (int, float))}
        if "input_cost_per_token" in kept or "output_cost_per_token" in kept:
            out[name] = kept
    json.dump(out, sys.stdout, indent=0, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
