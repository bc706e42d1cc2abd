export const greeting = (name) => `hello, ${name}`;
export let requests = 0;
export function count() {
  requests += 1;
  return requests;
}
