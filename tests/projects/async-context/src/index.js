// AsyncLocalStorage through awaits in ES modules, CommonJS and TypeScript (tests/test_async_context.py).
import { AsyncLocalStorage, AsyncResource } from "node:async_hooks";
import { later } from "./cjs.cjs";
import { twice, fails } from "./typed.ts";
const als = new AsyncLocalStorage();
const other = new AsyncLocalStorage();
const tick = () => new Promise((r) => setTimeout(r, 1));
async function deep(label) {
  await null;
  await tick();
  return [label, als.getStore()];
}
export async function run() {
  const seen = [];
  await als.run("A", async () => {
    seen.push(["sync", als.getStore()]);
    await tick();
    seen.push(["after await", als.getStore()]);
    seen.push(await deep("nested"));
    await new Promise((resolve) => setTimeout(() => { seen.push(["timer", als.getStore()]); resolve(); }, 1));
    await Promise.resolve().then(() => seen.push(["then", als.getStore()]));
    await new Promise((resolve) => queueMicrotask(() => { seen.push(["microtask", als.getStore()]); resolve(); }));
    try { await Promise.reject(new Error("x")); } catch (e) { seen.push(["catch", als.getStore(), e.message]); }
    await other.run("B", async () => { await tick(); seen.push(["two stores", als.getStore(), other.getStore()]); });
    seen.push(["back", als.getStore(), other.getStore()]);
  });
  seen.push(["outside", als.getStore() ?? null]);
  // Two interleaved runs keep their own stores.
  const interleaved = await Promise.all([1, 2, 3].map((n) => als.run(n, async () => {
    const got = [];
    for (let i = 0; i < 3; i++) { await tick(); got.push(als.getStore()); await null; got.push(als.getStore()); }
    return got;
  })));
  const resource = als.run("R", () => new AsyncResource("x"));
  const fromResource = resource.runInAsyncScope(() => als.getStore());
  const snapshot = als.run("S", () => AsyncLocalStorage.snapshot());
  const fromSnapshot = snapshot(() => als.getStore());
  const cjs = await als.run("cjs", () => later(als, tick));
  const typed = await als.run("ts", () => twice(als, tick));
  let stack = "";
  try { await als.run("x", async () => { await tick(); fails(); }); } catch (e) { stack = e.stack; }
  return { seen, interleaved, fromResource, fromSnapshot, cjs, typed, stack };
}
