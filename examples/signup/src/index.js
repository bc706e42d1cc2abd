// A signup flow as a durable Workflow: create the account, send a welcome mail, wait a
// little, then wait for the user to confirm their address (or remind them if they don't).
//
//   POST /signup              {"email": "..."}  -> {"id": "<instance id>"}
//   GET  /signup/:id                            -> {"id", "status", "output", "error"?}
//   POST /signup/:id/confirm                    -> {"id", "sent": "email-confirmed"}
import { WorkflowEntrypoint } from "cloudflare:workers";

export class SignupWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    // Durations come from params so the demo (and the tests) can make them short or long.
    const { email, sleep = "10 seconds", confirmTimeout = "1 minute" } = event.payload;

    // A step's return value is recorded once it succeeds; when run() is replayed after a
    // restart or a long sleep, the step returns the recorded account instead of running
    // again, so the generated id stays the same.
    const account = await step.do("create account", async () => ({
      id: `acct_${crypto.randomUUID()}`,
      email,
      createdAt: new Date().toISOString(),
    }));

    // Steps run at least once: a real mailer should take an idempotency key (the account id)
    // so that a retry or a crash right after sending does not mail twice.
    const welcome = await step.do("send welcome mail", async () =>
      sendMail(email, "Welcome! Please confirm your address.", account.id),
    );

    // A durable timer: nothing runs or stays in memory while it waits. A confirmation sent
    // meanwhile is kept and picked up by waitForEvent below.
    await step.sleep("give the mail time to arrive", sleep);

    try {
      const confirmation = await step.waitForEvent("confirm email", {
        type: "email-confirmed",
        timeout: confirmTimeout,
      });
      return {
        confirmed: true,
        account,
        welcomeMail: welcome.messageId,
        confirmedAt: new Date(confirmation.timestamp).toISOString(),
      };
    } catch {
      // The only way this wait fails is its timeout (a WorkflowTimeoutError); catching it
      // lets the workflow carry on instead of ending as "errored".
      const reminder = await step.do("send reminder", async () =>
        sendMail(email, "Still there? Your address is not confirmed yet.", account.id),
      );
      return {
        confirmed: false,
        reminded: true,
        account,
        welcomeMail: welcome.messageId,
        reminderMail: reminder.messageId,
      };
    }
  }
}

// Stands in for a mail provider's API: no SMTP, just a log line and a message id.
async function sendMail(to, text, idempotencyKey) {
  console.log(`mail to ${to}: ${text} (key ${idempotencyKey})`);
  return { messageId: `msg_${crypto.randomUUID()}`, to };
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, root, id, action] = url.pathname.split("/");
    if (root !== "signup") return Response.json({ error: "not found" }, { status: 404 });
    try {
      if (request.method === "POST" && id === undefined) {
        const { email, sleep, confirmTimeout } = await request.json().catch(() => ({}));
        if (typeof email !== "string" || !email.includes("@")) {
          return Response.json({ error: 'body must be {"email": "..."}' }, { status: 400 });
        }
        const instance = await env.SIGNUP.create({ params: { email, sleep, confirmTimeout } });
        return Response.json({ id: instance.id });
      }
      if (request.method === "GET" && id && action === undefined) {
        const instance = await env.SIGNUP.get(id);
        // Pick the documented fields (wrangler dev adds a local-only one), and show a missing
        // output as null the way wrangler dev does, so both print the same.
        const { status, output = null, error } = await instance.status();
        return Response.json({ id, status, output, error });
      }
      if (request.method === "POST" && id && action === "confirm") {
        const instance = await env.SIGNUP.get(id);
        // Accepted even before the workflow reaches its waitForEvent: the event is kept.
        await instance.sendEvent({ type: "email-confirmed", payload: { via: "link" } });
        return Response.json({ id, sent: "email-confirmed" });
      }
      return Response.json({ error: "not found" }, { status: 404 });
    } catch (e) {
      // get() of an unknown id throws an error whose message contains "not_found".
      const status = String(e.message).includes("not_found") ? 404 : 500;
      return Response.json({ error: e.message }, { status });
    }
  },
};
