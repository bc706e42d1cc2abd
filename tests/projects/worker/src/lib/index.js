export * from "./util.js";
export { default as routes } from "../routes.js";
