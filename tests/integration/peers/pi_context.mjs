// What Pi itself sends for a session file on resume, computed by Pi's own code: the installed
// @mariozechner/pi-coding-agent's SessionManager.open (the loader, its migrations, the leaf),
// buildSessionContext, convertToLlm, then pi-ai's transformMessages for the model Pi resumes
// with (the session's last model). Prints one message per line.
//
// usage: node pi_context.mjs PI_PREFIX SESSION_FILE
// PI_PREFIX is an `npm install --prefix` directory holding @mariozechner/pi-coding-agent.
// The file is copied first: Pi rewrites a version 1 or 2 file when it loads it.
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, file] = process.argv.slice(2);
const mods = join(prefix, "node_modules", "@mariozechner");
const agent = await import(pathToFileURL(join(mods, "pi-coding-agent", "dist", "index.js")).href);
const { transformMessages } = await import(pathToFileURL(join(mods, "pi-ai", "dist", "providers", "transform-messages.js")).href);

const dir = mkdtempSync(join(tmpdir(), "pi-context-"));
const copy = join(dir, "session.jsonl");
copyFileSync(file, copy);
const sm = agent.SessionManager.open(copy, dir);
const ctx = sm.buildSessionContext();
const llm = agent.convertToLlm(ctx.messages);
// The model Pi resumes with: the session's last (buildSessionContext's `model`), with the api
// of the last assistant message of that model (transformMessages compares provider, api, id).
const last = [...llm].reverse().find((m) => m.role === "assistant" && ctx.model && m.provider === ctx.model.provider && m.model === ctx.model.modelId);
// A model that takes images: images are sent as they are (a text-only model gets a placeholder).
const model = { provider: ctx.model ? ctx.model.provider : "", id: ctx.model ? ctx.model.modelId : "", api: last ? last.api : "", input: ["text", "image"] };
for (const m of transformMessages(llm, model)) {
	process.stdout.write(`${JSON.stringify(m)}\n`);
}
