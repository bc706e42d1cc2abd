// (a separate file so that entry.js can re-export pako's classes and its flush constants
// under one name)
import { Deflate, Inflate, Z_FINISH, Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FULL_FLUSH, Z_OK, Z_STREAM_END } from "pako";

export { Deflate, Inflate };
export const constants = { Z_FINISH, Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FULL_FLUSH, Z_OK, Z_STREAM_END };
