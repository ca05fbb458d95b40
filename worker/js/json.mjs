// JSON as the official JS server writes it: LangChain's messages (anything with `toDict`) become
// their fields with their `type`, errors their name and message.

function replacer(key, value) {
  const raw = this[key];
  if (raw != null && typeof raw === "object") {
    if (typeof raw.toDict === "function") {
      const { type, data } = raw.toDict();
      return { ...data, type };
    }
    if (raw instanceof Error) return { error: raw.name, message: raw.message };
    if (raw instanceof Set) return [...raw];
    if (raw instanceof Map) return Object.fromEntries(raw);
    if (raw instanceof Uint8Array) return Buffer.from(raw).toString("base64");
  }
  if (typeof value === "bigint") return Number(value);
  return value;
}

export function dumps(value) {
  return JSON.stringify(value === undefined ? null : value, replacer);
}

// The JSON value the official JS server would send for `value`.
export function jsonable(value) {
  return JSON.parse(dumps(value));
}
