#!/usr/bin/env python3
"""The peer of the token-count test: the OpenAI cookbook's `num_tokens_from_messages` and
`num_assistant_tokens_from_messages` (examples/Chat_finetuning_data_prep.ipynb), with
python tiktoken's cl100k_base built from the vocabulary file tiktoken-rs bundles (no
network). As in transcriptd, values that are not strings count as their compact JSON and
`weight` is not counted (the notebook handles string values only).

Usage: cookbook_tokens.py VOCAB FILE -> one JSON line per conversation: {"line", "tokens", "assistant_tokens"}.
"""
import json
import sys

import tiktoken
from tiktoken_ext import openai_public

vocab = sys.argv[1]
openai_public.load_tiktoken_bpe = lambda *_a, **_k: tiktoken.load.load_tiktoken_bpe(vocab)
encoding = tiktoken.Encoding(**openai_public.cl100k_base())


def text(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def num_tokens_from_messages(messages, tokens_per_message=3, tokens_per_name=1):
    num_tokens = 0
    for message in messages:
        num_tokens += tokens_per_message
        for key, value in message.items():
            if key == "weight" or value is None:
                continue
            num_tokens += len(encoding.encode_ordinary(text(value)))
            if key == "name":
                num_tokens += tokens_per_name
    num_tokens += 3
    return num_tokens


def num_assistant_tokens_from_messages(messages):
    num_tokens = 0
    for message in messages:
        if message.get("role") == "assistant":
            for key in ("content", "tool_calls", "function_call"):
                if message.get(key) is not None:
                    num_tokens += len(encoding.encode_ordinary(text(message[key])))
    return num_tokens


with open(sys.argv[2], encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        try:
            messages = json.loads(line)["messages"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(messages, list) or not messages:
            continue
        print(json.dumps({"line": n, "tokens": num_tokens_from_messages(messages), "assistant_tokens": num_assistant_tokens_from_messages(messages)}))
