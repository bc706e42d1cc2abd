// The matcher of the local step rules (celld/engine/local.py): the table comes from the
// engine as data, and this evaluates it exactly as `decide` there does, first match wins.
// Taken by js/workflows/step.js, which deletes the global before user code runs.
"use strict";
(() => {
  const ObjectKeys = Object.keys; // (as it was before user code ran)
  /** The outcome `rules` ([[conditions, outcome], ...]) give for `facts`. */
  function decide(rules, facts) {
    for (let i = 0; i < rules.length; i++) {
      const when = rules[i][0];
      const names = ObjectKeys(when);
      let holds = true;
      for (let j = 0; j < names.length; j++) {
        const name = names[j];
        const wanted = when[name];
        if (name === "sizeAtMost" ? !(facts.size <= wanted) : facts[name] !== wanted) {
          holds = false;
          break;
        }
      }
      if (holds) return rules[i][1];
    }
    return "ask";
  }
  Object.defineProperty(globalThis, "__celld_step_rules_decide", {
    value: decide, configurable: true, enumerable: false, writable: false,
  });
})();
