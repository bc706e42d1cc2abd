export default {
  fetch(request) {
    return new Response("ok";
  },
};
