#!/usr/bin/env python3
"""Writes the repair cases of the Anthropic Messages API's block rules (issue 27 point 5):
tests/data/repair/0040-0043. Claude Code files in the shape 2.1.x writes (one block per line,
lines of one message sharing `message.id`), with the session id of the other salvage cases so
that the real agent resumes them (tests/integration/oracle.rs,
`repaired_api_rule_shapes_resume_in_the_agent_and_the_api_takes_them`). The images are PNG
headers whose IHDR gives the size the rule is about (the API rules read no more of them).

    python3 tests/gen/gen_api_repair_cases.py tests/data/repair
"""
import base64
import json
import struct
import sys
import zlib
from pathlib import Path

SID = "6b0e7a52-2f0c-4f1e-9c53-1d2a3b4c5d6e"


def line(kind, uuid, parent, message, n, **more):
    d = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": SID,
         "version": "2.1.108", "type": kind, "message": message, "uuid": uuid,
         "timestamp": f"2026-11-05T10:00:{n:02}.000Z"}
    d.update(more)
    return d


def user(n, uuid, parent, content, **more):
    return line("user", uuid, parent, {"role": "user", "content": content}, n, **more)


def assistant(n, uuid, parent, mid, content, stop="end_turn"):
    return line("assistant", uuid, parent, {"id": mid, "type": "message", "role": "assistant", "model": "claude-opus-4-6",
                                           "content": content, "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 5}}, n)


def png(w, h):
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    idat = b"IDAT" + zlib.compress(b"\0" * 16)
    b = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    b += struct.pack(">I", len(idat) - 4) + idat + struct.pack(">I", zlib.crc32(idat))
    b += struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    return base64.b64encode(b).decode()


def image(data):
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


CALL = {"type": "tool_use", "id": "toolu_shot", "name": "Bash", "input": {"command": "screenshot"}}


def cases():
    shot = png(300, 8500)
    yield "0040_api_images_over_the_limits_become_placeholders", [
        user(0, "u001", None, [{"type": "text", "text": "look at this"}, image(png(9000, 300))]),
        assistant(1, "a001", "u001", "msg_a", [CALL], "tool_use"),
        user(2, "r001", "a001", [{"tool_use_id": "toolu_shot", "type": "tool_result",
                                  "content": [{"type": "text", "text": "the screen"}, image(shot)]}],
             toolUseResult={"type": "image", "file": {"base64": shot, "type": "image/png"}}, sourceToolAssistantUUID="a001"),
        user(3, "u002", "r001", [{"type": "text", "text": "and this"}, image("")]),
        assistant(4, "a002", "u002", "msg_b", [{"type": "text", "text": "A wide picture and a tall one."}]),
    ]
    yield "0041_api_unsigned_thinking_blocks_go", [
        user(0, "u001", None, "run the screenshot"),
        assistant(1, "a001", "u001", "msg_a", [{"type": "thinking", "thinking": "A screenshot, then.", "signature": ""}]),
        assistant(2, "a002", "a001", "msg_a", [{"type": "text", "text": "Taking it."}]),
        assistant(3, "a003", "a002", "msg_a", [CALL], "tool_use"),
        user(4, "r001", "a003", [{"tool_use_id": "toolu_shot", "type": "tool_result", "content": "saved to shot.png"}], sourceToolAssistantUUID="a003"),
        assistant(5, "a004", "r001", "msg_b", [{"type": "thinking", "thinking": "It worked."}, {"type": "text", "text": "Saved as shot.png."}]),
    ]
    yield "0042_api_thinking_and_results_move_first", [
        user(0, "u001", None, "run the screenshot"),
        assistant(1, "a001", "u001", "msg_a", [{"type": "text", "text": "Taking it."},
                                             {"type": "thinking", "thinking": "A screenshot, then.", "signature": "c2lnbmF0dXJl"}, CALL], "tool_use"),
        user(2, "r001", "a001", [{"type": "text", "text": "here you go"},
                                 {"tool_use_id": "toolu_shot", "type": "tool_result", "content": "saved to shot.png"}], sourceToolAssistantUUID="a001"),
        assistant(3, "a002", "r001", "msg_b", [{"type": "text", "text": "Saved as shot.png."}]),
    ]
    yield "0043_api_many_images_over_2000_px", [
        user(0, "u001", None, [{"type": "text", "text": "compare these"}] + [image(png(2500, 300)) for _ in range(20)]),
        assistant(1, "a001", "u001", "msg_a", [{"type": "text", "text": "Twenty wide ones. Any more?"}]),
        user(2, "u002", "a001", [{"type": "text", "text": "one more"}, image(png(640, 480))]),
        assistant(3, "a002", "u002", "msg_b", [{"type": "text", "text": "A small one."}]),
    ]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/repair")
    for name, lines in cases():
        (out / f"{name}.jsonl").write_text("".join(json.dumps(l, separators=(",", ":"), ensure_ascii=False) + "\n" for l in lines))


if __name__ == "__main__":
    main()
