#!/usr/bin/env python3
"""The peer of the dataset differential test: mistral-common's request validator in
fine-tuning mode, one verdict per line of an OpenAI chat fine-tuning file.

Usage: mistral_verdicts.py FILE  ->  one JSON line per non-blank line: {"line", "ok", "error"}.

Each line is parsed with json, its `messages` and `tools` converted with
ChatCompletionRequest.from_openai and validated by the validator of tokenizer version 13 in
ValidationMode.finetuning (v13: call ids need only be non-empty, assistant messages may hold
content and calls; earlier versions also demand Mistral's 9-character ids). Any exception is
a rejection.
"""
import json
import sys

from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.validator import ValidationMode, get_validator
from mistral_common.tokens.tokenizers.base import TokenizerVersion

validator = get_validator(TokenizerVersion.v13, ValidationMode.finetuning)


def verdict(text):
    try:
        d = json.loads(text)
        req = ChatCompletionRequest.from_openai(d["messages"], tools=d.get("tools"))
        validator.validate_request(req)
        return True, ""
    except Exception as e:  # noqa: BLE001 - any failure is the peer's "rejected"
        return False, f"{type(e).__name__}: {e}"[:300]


with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, text in enumerate(f, 1):
        if not text.strip():
            continue
        ok, err = verdict(text)
        print(json.dumps({"line": n, "ok": ok, "error": err}))
