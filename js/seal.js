// Last runtime file: the built-ins as the runtime left them are the reference state
// `__celld_intrinsics_changed()` compares against (user modules run after this).
"use strict";
globalThis.__celld_intrinsics_seal();
