import { useState, createContext, useContext } from "react";

export const Theme = createContext("light");

export function Counter({ start = 0, label }) {
  const [count] = useState(start);
  const theme = useContext(Theme);
  return (
    <button type="button" className={`counter ${theme}`} aria-label={label}>
      {label}: {count}
    </button>
  );
}
