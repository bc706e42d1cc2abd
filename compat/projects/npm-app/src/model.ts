// TypeScript features that need more than type erasure.
export enum Role {
  Reader,
  Writer = 5,
  Admin,
  Owner = "owner",
}

export const enum Flag {
  None = 0,
  Read = 1 << 0,
  Write = 1 << 1,
  All = Read | Write,
}

export abstract class Shape {
  declare readonly kind: string;
  abstract area(): number;
  describe(): string {
    return `${this.constructor.name}:${this.area().toFixed(2)}`;
  }
}

export class Rect extends Shape {
  label!: string;
  constructor(
    public readonly width: number,
    private height: number = 2,
    protected scale?: number,
  ) {
    super();
    this.label = `${width}x${height}`;
  }
  override area(): number {
    return this.width * this.height * (this.scale ?? 1);
  }
}

export namespace Units {
  export const base = 10;
  export function times(n: number): number {
    return n * base * factor;
  }
  const factor = 2;
  export namespace Nested {
    export const tag = "nested";
  }
}

export type Config = { retries: number; name: string };
export const defaults = { retries: 3, name: "app" } satisfies Config;
