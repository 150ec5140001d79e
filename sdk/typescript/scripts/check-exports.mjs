// `npm run check:exports`: @arethetypeswrong/cli on the package exactly as `npm pack` makes it.
// `attw --pack` packs through the prepack script, which builds everything again (13 s of CPU
// here, after `npm test` had just built it); this packs the dist as it is, with the scripts off,
// and builds first only when a source is newer than the dist.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

const built = join(root, "dist/esm/index.js");
const sources = ["src", "package.json", "scripts/gen.mjs", "scripts/dist.mjs"].map((p) => join(root, p));
if (!existsSync(built) || Math.max(...sources.map(newest)) > statSync(built).mtimeMs) {
  execFileSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });
}
const out = mkdtempSync(join(tmpdir(), "wiggle-pack-"));
try {
  const packed = execFileSync(
    "npm",
    ["pack", "--ignore-scripts", "--silent", "--pack-destination", out],
    { cwd: root, encoding: "utf8" },
  );
  const tarball = join(out, packed.trim().split("\n").pop());
  execFileSync(join(root, "node_modules/.bin/attw"), ["--profile", "node16", tarball], {
    cwd: root,
    stdio: "inherit",
  });
} finally {
  rmSync(out, { recursive: true, force: true });
}
