import { Hono } from "hono";
import { Fragment } from "hono/jsx";
import { Layout, List } from "./components";

const app = new Hono();

const items = [
  { id: 1, name: "Write <JSX>", done: true },
  { id: 2, name: "Serve it", done: false },
];

app.get("/", (c) =>
  c.html(
    <Layout title="Tasks &amp; more">
      <h1>
        Tasks
        for   today
      </h1>
      {/* the list itself */}
      <List items={items} />
      <>
        <p {...{ id: "spread", title: "t" }}>fragment &nbsp;child</p>
      </>
      <Fragment>
        <svg:use xlink:href="#icon" />
      </Fragment>
    </Layout>,
  ),
);

app.get("/broken", () => {
  const Thrower = (): never => {
    throw new Error("thrown inside a component");
  };
  return new Response(String(<Thrower />));
});

export default app;
