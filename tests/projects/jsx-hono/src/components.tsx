import type { FC, PropsWithChildren } from "hono/jsx";

export const Layout: FC<PropsWithChildren<{ title: string }>> = ({ title, children }) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <title>{title}</title>
    </head>
    <body>{children}</body>
  </html>
);

type Item = { id: number; name: string; done: boolean };

export const List = ({ items }: { items: Item[] }) => (
  <ul class="items">
    {items.map((item) => (
      <li key={item.id} data-id={item.id} class={item.done ? "done" : undefined}>
        {item.name}
        {item.done && <span> &check; done</span>}
      </li>
    ))}
  </ul>
);
