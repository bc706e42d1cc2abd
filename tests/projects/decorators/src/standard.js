// Standard (TC39) decorators, which JavaScript files always get
const calls = [];

function logged(value, { kind, name, addInitializer }) {
  addInitializer(function () {
    calls.push(`ready ${String(name)}`);
  });
  if (kind === "method") {
    return function (...args) {
      calls.push(`${String(name)}(${args.join(", ")})`);
      return value.apply(this, args);
    };
  }
}

function clamp(max) {
  return (value, context) => (initial) => Math.min(initial, max);
}

function register(value, { name, metadata }) {
  metadata.registered = name;
}

@register
export class Counter {
  @clamp(10) count = 42;

  @logged
  add(n) {
    this.count += n;
    return this.count;
  }
}

export function standardReport() {
  const counter = new Counter();
  const before = counter.count;
  const after = counter.add(5);
  const metadata = Counter[Symbol.metadata || Symbol.for("Symbol.metadata")];
  return { before, after, calls, registered: metadata.registered };
}
