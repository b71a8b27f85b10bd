#!/usr/bin/env node
// The `transcriptd` command of the npm package: finds the native binary in the per-platform
// package npm installed beside this one (an optional dependency whose `os` and `cpu` match
// this machine, as Claude Code and esbuild ship theirs) and runs it with this process's
// arguments, standard streams, working directory and environment, exiting as it exits.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

const platform = `${process.platform}-${process.arch}`;
const pkg = `transcriptd-${platform}`;

function binary() {
  // TRANSCRIPTD_BINARY runs another build (a development one) through the same launcher.
  if (process.env.TRANSCRIPTD_BINARY) return process.env.TRANSCRIPTD_BINARY;
  try {
    return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", "transcriptd");
  } catch {
    return null;
  }
}

const bin = binary();
if (bin === null) {
  process.stderr.write(
    `transcriptd: no native binary for ${platform}: the package ${pkg} is not installed.\n` +
      `It is an optional dependency of transcriptd: npm skips it on another platform, or when\n` +
      `optional dependencies are turned off (--omit=optional, --no-optional). Reinstall with them,\n` +
      `or build from source: cargo install --path . (see docs/install.md).\n`,
  );
  process.exit(2);
}

// The child has the terminal; this process only waits and passes signals on. Ctrl-C and
// Ctrl-\ reach the whole foreground group, the child included, so they are only kept from
// ending this process before the child has; SIGTERM and SIGHUP (`kill`, a reload) are sent to
// this process alone, so they are passed to the child.
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const s of ["SIGINT", "SIGQUIT"]) process.on(s, () => {});
for (const s of ["SIGTERM", "SIGHUP"]) process.on(s, () => child.kill(s));
child.on("error", (e) => {
  process.stderr.write(`transcriptd: cannot run ${bin}: ${e.message}\n`);
  process.exit(2);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so that a shell sees what the child died of.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 2 : code);
});
