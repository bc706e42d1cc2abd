import { Fragment } from "react";
import { renderToString, renderToStaticMarkup } from "react-dom/server";
import { Counter, Theme } from "./Counter.jsx";

type Row = { key: string; cells: string[] };

function Table({ rows }: { rows: Row[] }) {
  return (
    <table>
      <tbody>
        {rows.map((row) => (
          <Fragment key={row.key}>
            <tr>
              {row.cells.map((cell, index) => <td key={index}>{cell}</td>)}
            </tr>
          </Fragment>
        ))}
      </tbody>
    </table>
  );
}

function Page() {
  const rows: Row[] = [
    { key: "a", cells: ["1", "<2>"] },
    { key: "b", cells: ["3 & 4"] },
  ];
  return (
    <Theme.Provider value="dark">
      <main id="app" style={{ color: "red", marginTop: 4 }}>
        <h1>
          Hello,
          React &mdash; on Workers
        </h1>
        <Counter start={3} label="Clicks" />
        <Table rows={rows} />
        <input type="checkbox" defaultChecked disabled={false} />
        {null}
        {false && <p>hidden</p>}
      </main>
    </Theme.Provider>
  );
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/static") {
      return new Response(renderToStaticMarkup(<Page />), {
        headers: { "content-type": "text/html; charset=utf-8" },
      });
    }
    return new Response(renderToString(<Page />), {
      headers: { "content-type": "text/html; charset=utf-8" },
    });
  },
};
