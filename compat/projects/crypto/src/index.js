// Web Crypto, node:crypto and jose, answering JSON: deterministic outputs (known keys, fixed
// IVs) that must be equal byte for byte on every target, and round trips for the rest.
import * as jose from "jose";
import nodeCrypto from "node:crypto";
import { Buffer } from "node:buffer";
import { ED_JWK, EC_JWK, RSA_PKCS8, RSA_SPKI } from "./keys.js";

const subtle = crypto.subtle;
const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s) => new Uint8Array(s.match(/../g).map((h) => parseInt(h, 16)));
const utf8 = (s) => new TextEncoder().encode(s);
const b64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const pem = (label, base64) =>
  `-----BEGIN ${label}-----\n${base64.match(/.{1,64}/g).join("\n")}\n-----END ${label}-----`;
const publicJwk = ({ d, ...rest }) => rest;

/** The messages of the failures seen (shown beside the answers; their wording differs). */
let messages = [];

/** The error name a promise rejects with, and whether it is a DOMException. */
async function failure(promise) {
  try {
    await promise;
    return null;
  } catch (error) {
    messages.push(`${error.name}: ${error.message}`);
    return [error.name, error instanceof DOMException];
  }
}

async function vectors() {
  const out = {};
  for (const name of ["SHA-1", "SHA-256", "SHA-384", "SHA-512", "MD5"]) {
    out[name] = hex(await subtle.digest(name, utf8("abc")));
  }
  const hmac = await subtle.importKey("raw", utf8("Jefe"), { name: "HMAC", hash: "SHA-256" }, true, ["sign"]);
  out.hmac = hex(await subtle.sign("HMAC", hmac, utf8("what do ya want for nothing?")));
  out.hmacJwk = await subtle.exportKey("jwk", hmac);

  const aesKey = unhex("feffe9928665731c6d6a8f9467308308");
  const gcm = await subtle.importKey("raw", aesKey, "AES-GCM", true, ["encrypt", "decrypt"]);
  out.gcm = hex(await subtle.encrypt(
    { name: "AES-GCM", iv: unhex("cafebabefacedbaddecaf888"), additionalData: utf8("aad") }, gcm, utf8("plain text")));
  out.gcm96 = hex(await subtle.encrypt(
    { name: "AES-GCM", iv: unhex("cafebabefacedbaddecaf888"), tagLength: 96 }, gcm, utf8("plain text")));
  out.gcmJwk = await subtle.exportKey("jwk", gcm);
  out.gcmAlgorithm = gcm.algorithm;
  const cbc = await subtle.importKey("raw", aesKey, "AES-CBC", false, ["encrypt"]);
  out.cbc = hex(await subtle.encrypt({ name: "AES-CBC", iv: new Uint8Array(16) }, cbc, utf8("plain text")));
  const ctr = await subtle.importKey("raw", aesKey, "AES-CTR", false, ["encrypt"]);
  out.ctr = hex(await subtle.encrypt(
    { name: "AES-CTR", counter: unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"), length: 8 }, ctr, new Uint8Array(40)));
  const kek = await subtle.importKey("raw", unhex("000102030405060708090a0b0c0d0e0f"), "AES-KW", false, ["wrapKey", "unwrapKey"]);
  out.kw = hex(await subtle.wrapKey("raw", gcm, kek, "AES-KW"));

  const password = await subtle.importKey("raw", utf8("password"), "PBKDF2", false, ["deriveBits"]);
  out.pbkdf2 = hex(await subtle.deriveBits(
    { name: "PBKDF2", hash: "SHA-256", salt: utf8("salt"), iterations: 1000 }, password, 256));
  const ikm = await subtle.importKey("raw", new Uint8Array(22).fill(11), "HKDF", false, ["deriveBits"]);
  out.hkdf = hex(await subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: unhex("000102030405060708090a0b0c"), info: unhex("f0f1f2f3f4f5f6f7f8f9") }, ikm, 336));

  const ecdhPrivate = await subtle.importKey("jwk", EC_JWK, { name: "ECDH", namedCurve: "P-256" }, true, ["deriveBits"]);
  const ecdsaPublic = await subtle.importKey("jwk", publicJwk(EC_JWK), { name: "ECDSA", namedCurve: "P-256" }, true, ["verify"]);
  const ecdhPublic = await subtle.importKey("raw", await subtle.exportKey("raw", ecdsaPublic), { name: "ECDH", namedCurve: "P-256" }, true, []);
  out.ecdh = hex(await subtle.deriveBits({ name: "ECDH", public: ecdhPublic }, ecdhPrivate, 256));
  out.ecSpki = hex(await subtle.exportKey("spki", ecdsaPublic));
  out.ecJwk = await subtle.exportKey("jwk", ecdsaPublic);
  out.ecdhJwk = await subtle.exportKey("jwk", ecdhPrivate);

  const ed = await subtle.importKey("jwk", ED_JWK, "Ed25519", true, ["sign"]);
  out.ed25519 = hex(await subtle.sign("Ed25519", ed, utf8("celld")));
  out.edJwk = await subtle.exportKey("jwk", ed);
  out.edAlgorithm = ed.algorithm;
  const x = await subtle.importKey("jwk", { ...ED_JWK, crv: "X25519", x: undefined, alg: undefined }, "X25519", true, ["deriveBits"])
    .catch((e) => e.name);
  out.x25519FromEdJwk = typeof x === "string" ? x : "imported";

  const rsaSigner = await subtle.importKey("pkcs8", b64(RSA_PKCS8), { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, true, ["sign"]);
  out.rsa = hex(await subtle.sign("RSASSA-PKCS1-v1_5", rsaSigner, utf8("celld")));
  out.rsaAlgorithm = { ...rsaSigner.algorithm, publicExponent: [...rsaSigner.algorithm.publicExponent] };
  const rsaJwk = await subtle.exportKey("jwk", rsaSigner);
  // (workerd's JWK also has every other JsonWebKey member, set to undefined)
  out.rsaJwk = Object.keys(rsaJwk).filter((name) => rsaJwk[name] !== undefined).sort();
  out.rsaJwkAlg = [rsaJwk.alg, rsaJwk.e, rsaJwk.key_ops, rsaJwk.ext];
  return out;
}

async function errors() {
  const aes = await subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["encrypt"]);
  const hmac = await subtle.generateKey({ name: "HMAC", hash: "SHA-256" }, true, ["sign"]);
  const pair = await subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"]);
  return {
    unknownAlgorithm: await failure(subtle.generateKey({ name: "AES-XTS", length: 128 }, true, ["encrypt"])),
    digestUnknown: await failure(subtle.digest("SHA-3", new Uint8Array(1))),
    signWithAes: await failure(subtle.sign("AES-GCM", aes, new Uint8Array(1))),
    decryptWithoutUsage: await failure(subtle.decrypt({ name: "AES-GCM", iv: new Uint8Array(12) }, aes, new Uint8Array(32))),
    wrongAlgorithmForKey: await failure(subtle.sign({ name: "ECDSA", hash: "SHA-256" }, hmac, new Uint8Array(1))),
    exportNotExtractable: await failure(subtle.exportKey("pkcs8", pair.privateKey)),
    badTag: await failure(subtle.decrypt({ name: "AES-GCM", iv: new Uint8Array(12) },
      await subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["decrypt"]), new Uint8Array(32))),
    badAesLength: await failure(subtle.importKey("raw", new Uint8Array(20), "AES-GCM", false, ["encrypt"])),
    emptyUsages: await failure(subtle.generateKey({ name: "AES-GCM", length: 128 }, true, [])),
    badUsage: await failure(subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["sign"])),
    wrongCurve: await failure(subtle.importKey("jwk", publicJwk(EC_JWK), { name: "ECDSA", namedCurve: "P-384" }, true, ["verify"])),
    rawRsaExport: await failure(subtle.exportKey("raw", await subtle.importKey("spki", b64(RSA_SPKI),
      { name: "RSA-PSS", hash: "SHA-256" }, true, ["verify"]))),
    pbkdf2Extractable: await failure(subtle.importKey("raw", utf8("p"), "PBKDF2", true, ["deriveBits"])),
  };
}

const IAT = 1700000000;

async function joseTokens() {
  const payload = { sub: "ada", iat: IAT, aud: "celld" };
  const hs = new TextEncoder().encode("a-string-secret-at-least-256-bits-long");
  const rsa = await jose.importPKCS8(pem("PRIVATE KEY", RSA_PKCS8), "RS256");
  const es = await jose.importJWK(EC_JWK, "ES256");
  const ed = await jose.importJWK({ ...ED_JWK }, "EdDSA");
  const sign = (alg, key) => new jose.SignJWT(payload).setProtectedHeader({ alg }).sign(key);
  const out = {
    HS256: await sign("HS256", hs),
    RS256: await sign("RS256", rsa),
    EdDSA: await sign("EdDSA", ed),
    ES256: await sign("ES256", es),
    PS256: await sign("PS256", await jose.importPKCS8(pem("PRIVATE KEY", RSA_PKCS8), "PS256")),
  };
  const rsaPublic = await jose.importSPKI(pem("PUBLIC KEY", RSA_SPKI), "RSA-OAEP");
  out.JWE = await new jose.EncryptJWT(payload)
    .setProtectedHeader({ alg: "RSA-OAEP", enc: "A256GCM" })
    .encrypt(rsaPublic);
  out.JWEdir = await new jose.CompactEncrypt(utf8("direct"))
    .setProtectedHeader({ alg: "A256KW", enc: "A128CBC-HS256" })
    .encrypt(new Uint8Array(32).fill(7));
  out.JWEecdh = await new jose.CompactEncrypt(utf8("agreed"))
    .setProtectedHeader({ alg: "ECDH-ES+A128KW", enc: "A256GCM" })
    .encrypt(await jose.importJWK(publicJwk(EC_JWK), "ECDH-ES+A128KW"));
  return out;
}

const VERIFY_KEYS = {
  HS256: async () => new TextEncoder().encode("a-string-secret-at-least-256-bits-long"),
  RS256: () => jose.importSPKI(pem("PUBLIC KEY", RSA_SPKI), "RS256"),
  PS256: () => jose.importSPKI(pem("PUBLIC KEY", RSA_SPKI), "PS256"),
  ES256: () => jose.importJWK(publicJwk(EC_JWK), "ES256"),
  EdDSA: () => jose.importJWK(publicJwk(ED_JWK), "EdDSA"),
};

/** Verify a JWS or decrypt a JWE made anywhere (this target or another) with the fixed keys. */
async function joseCheck(kind, token) {
  try {
    if (kind === "JWE") {
      const key = await jose.importPKCS8(pem("PRIVATE KEY", RSA_PKCS8), "RSA-OAEP");
      const { payload, protectedHeader } = await jose.jwtDecrypt(token, key, { audience: "celld" });
      return { ok: true, payload, header: protectedHeader };
    }
    if (kind === "JWEdir") {
      const { plaintext } = await jose.compactDecrypt(token, new Uint8Array(32).fill(7));
      return { ok: true, payload: new TextDecoder().decode(plaintext) };
    }
    if (kind === "JWEecdh") {
      const key = await jose.importJWK(EC_JWK, "ECDH-ES+A128KW");
      const { plaintext } = await jose.compactDecrypt(token, key);
      return { ok: true, payload: new TextDecoder().decode(plaintext) };
    }
    const { payload, protectedHeader } = await jose.jwtVerify(token, await VERIFY_KEYS[kind](), {
      audience: "celld", currentDate: new Date((IAT + 60) * 1000),
    });
    return { ok: true, payload, header: protectedHeader };
  } catch (error) {
    return { ok: false, code: error.code, name: error.name };
  }
}

async function joseGenerated() {
  const out = {};
  for (const alg of ["RS256", "ES256", "ES384", "ES512", "EdDSA", "PS256"]) {
    const { publicKey, privateKey } = await jose.generateKeyPair(alg, { extractable: true });
    const token = await new jose.SignJWT({ n: 1 }).setProtectedHeader({ alg }).sign(privateKey);
    const { payload } = await jose.jwtVerify(token, publicKey);
    const jwk = await jose.exportJWK(publicKey);
    out[alg] = [payload.n, jwk.kty, jwk.crv ?? null, (await jose.exportSPKI(publicKey)).split("\n")[0]];
  }
  const secret = await jose.generateSecret("A256GCM", { extractable: true });
  const { publicKey, privateKey } = await jose.generateKeyPair("RSA-OAEP-256");
  const jwe = await new jose.EncryptJWT({ n: 2 }).setProtectedHeader({ alg: "RSA-OAEP-256", enc: "A256GCM" }).encrypt(publicKey);
  out.jwe = (await jose.jwtDecrypt(jwe, privateKey)).payload.n;
  out.secret = (await jose.exportJWK(secret)).kty;
  return out;
}

function nodeSync() {
  const c = nodeCrypto;
  return {
    hash: c.createHash("sha256").update("abc").digest("hex"),
    md5: c.createHash("md5").update("abc").digest("base64"),
    sha512_256: c.hash("sha512-256", "abc"),
    hmac: c.createHmac("sha256", "Jefe").update("what do ya want for nothing?").digest("hex"),
    copy: (() => {
      const h = c.createHash("sha1").update("a");
      const d = h.copy().update("b").digest("hex");
      return [d, h.digest("hex")];
    })(),
    pbkdf2Sync: c.pbkdf2Sync("password", "salt", 2, 20, "sha1").toString("hex"),
    hkdfSync: Buffer.from(c.hkdfSync("sha256", Buffer.alloc(22, 11), Buffer.from("000102030405060708090a0b0c", "hex"),
      Buffer.from("f0f1f2f3f4f5f6f7f8f9", "hex"), 42)).toString("hex"),
    // RFC 7914's first vector: scryptSync runs in the isolate (slow there), scrypt on the host.
    scryptSync: c.scryptSync("", "", 64, { N: 16, r: 1, p: 1 }).toString("hex"),
    secretKey: c.createSecretKey(Buffer.from("k")).symmetricKeySize,
    timingSafeEqual: c.timingSafeEqual(Buffer.from("ab"), Buffer.from("ab")),
    randomBytes: c.randomBytes(8).length,
    uuid: /^[0-9a-f-]{36}$/.test(c.randomUUID()),
  };
}

/** One of node:crypto's callback functions, as a promise of its results. */
function nodeAsync(name) {
  const c = nodeCrypto;
  const privatePem = pem("PRIVATE KEY", RSA_PKCS8);
  const publicPem = pem("PUBLIC KEY", RSA_SPKI);
  const calls = {
    pbkdf2: (done) => c.pbkdf2("password", "salt", 2, 20, "sha1", done),
    scrypt: (done) => c.scrypt("password", "NaCl", 16, { N: 1024, r: 8, p: 16 }, done),
    hkdf: (done) => c.hkdf("sha256", "key", "salt", "info", 16, done),
    sign: (done) => c.sign("sha256", Buffer.from("celld"), privatePem, done),
    verify: (done) => c.sign("sha256", Buffer.from("celld"), privatePem, (error, signature) => error
      ? done(error) : c.verify("sha256", Buffer.from("celld"), publicPem, signature, done)),
    generateKeyPair: (done) => c.generateKeyPair("ec", {
      namedCurve: "P-256",
      publicKeyEncoding: { type: "spki", format: "pem" },
      privateKeyEncoding: { type: "pkcs8", format: "pem" },
    }, (error, publicKey, privateKey) => done(error, [publicKey.split("\n")[0], privateKey.split("\n")[0]])),
  };
  return new Promise((resolve, reject) => {
    calls[name]((error, value) => {
      if (error) return reject(error);
      if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return resolve(Buffer.from(value).toString("hex"));
      resolve(value);
    });
  });
}

const json = (value, status = 200) => new Response(JSON.stringify(value), {
  status, headers: { "content-type": "application/json" },
});

export default {
  async fetch(request) {
    const url = new URL(request.url);
    try {
      switch (url.pathname) {
        case "/vectors": return json(await vectors());
        case "/errors": {
          messages = [];
          const names = await errors();
          return json({ names, messages });
        }
        case "/jose/tokens": return json(await joseTokens());
        case "/jose/check": {
          const { kind, token } = await request.json();
          return json(await joseCheck(kind, token));
        }
        case "/jose/generated": return json(await joseGenerated());
        case "/node": return json(nodeSync());
        case "/node/async": return json(await nodeAsync(url.searchParams.get("call")));
        case "/random": {
          const a = crypto.getRandomValues(new Uint8Array(65536));
          const b = crypto.getRandomValues(new Uint8Array(65536));
          return json({ differ: hex(a.slice(0, 32)) !== hex(b.slice(0, 32)), uuid: crypto.randomUUID().length });
        }
      }
      return json({ error: "not found" }, 404);
    } catch (error) {
      return json({ error: { name: error.name, message: error.message, stack: error.stack } }, 500);
    }
  },
};
