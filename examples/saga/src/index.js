// Book a trip as a saga: each booking step carries the step that undoes it.
//
//   POST /trips                 {"traveller", "carAvailable"?: false, "holdHotel"?: true}
//                                                              -> {"id"}
//   GET  /trips/:id             -> {"id", "status", "error"?, "rollback"?, "bookings"}
//   POST /trips/:id/cancel      terminate({rollback: true}): undo what was booked, then stop
//   POST /trips/:id/confirm     the "confirmed" event a held trip waits for
//
// Bookings live in KV (the "partner systems" of this example): `<id>:flight` etc. hold
// "booked" or "cancelled", so the compensation is visible from outside the workflow.
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

const cancelConfig = { retries: { limit: 3, delay: "1 second", backoff: "constant" }, timeout: "30 seconds" };

export class TripWorkflow extends WorkflowEntrypoint {
  async run(event, step) {
    const { traveller, carAvailable = true, holdHotel = false } = event.payload;
    const id = event.instanceId;
    const kv = this.env.BOOKINGS;

    // Each step books one thing; its rollback handler cancels it. A handler gets the
    // step's output (the booking), the error that made the trip fail, and the step's ctx.
    const cancel = (what) => async ({ output, error, ctx }) => {
      await kv.put(`${id}:${what}`, `cancelled (${ctx.step.name}: ${error.message})`);
      return output;
    };

    const flight = await step.do(
      "book flight",
      async () => {
        await kv.put(`${id}:flight`, "booked");
        return { ref: `FL-${id.slice(0, 6)}`, traveller };
      },
      { rollback: cancel("flight"), rollbackConfig: cancelConfig },
    );

    const hotel = await step.do(
      "book hotel",
      async () => {
        await kv.put(`${id}:hotel`, "booked");
        return { ref: `HT-${id.slice(0, 6)}`, traveller };
      },
      { rollback: cancel("hotel"), rollbackConfig: cancelConfig },
    );

    if (holdHotel) {
      // Wait for the traveller to confirm; `POST /trips/:id/cancel` meanwhile terminates
      // the trip with rollback: flight and hotel are cancelled.
      await step.waitForEvent("traveller confirms", { type: "confirmed", timeout: "1 day" });
    }

    const car = await step.do("book car", { retries: { limit: 1, delay: "1 second" } }, async () => {
      if (!carAvailable) throw new NonRetryableError("no car available at the destination");
      await kv.put(`${id}:car`, "booked");
      return { ref: `CR-${id.slice(0, 6)}`, traveller };
    });

    return { flight: flight.ref, hotel: hotel.ref, car: car.ref };
  }
}

async function bookings(env, id) {
  const out = {};
  for (const what of ["flight", "hotel", "car"]) {
    const value = await env.BOOKINGS.get(`${id}:${what}`);
    if (value !== null) out[what] = value;
  }
  return out;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const [, root, id, action] = url.pathname.split("/");
    if (root !== "trips") return Response.json({ error: "not found" }, { status: 404 });
    try {
      if (request.method === "POST" && id === undefined) {
        const { traveller = "ada", carAvailable, holdHotel } = await request.json().catch(() => ({}));
        const instance = await env.TRIP.create({ params: { traveller, carAvailable, holdHotel } });
        return Response.json({ id: instance.id });
      }
      const instance = await env.TRIP.get(id);
      if (request.method === "POST" && action === "cancel") {
        await instance.terminate({ rollback: true });
      } else if (request.method === "POST" && action === "confirm") {
        await instance.sendEvent({ type: "confirmed", payload: {} });
      } else if (request.method !== "GET" || action !== undefined) {
        return Response.json({ error: "not found" }, { status: 404 });
      }
      const status = await instance.status();
      return Response.json({ id, ...status, bookings: await bookings(env, id) });
    } catch (error) {
      return Response.json({ error: String(error.message ?? error) }, { status: 400 });
    }
  },
};
