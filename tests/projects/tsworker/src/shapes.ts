export interface Shape {
  kind: "square" | "circle";
  size: number;
}

export function area(shape: Shape): number {
  return shape.kind === "square" ? shape.size ** 2 : Math.round(Math.PI * shape.size ** 2);
}
