// The X.509 certificates the test clusters need beyond the apiserver's own self-signed one: a CA
// and certificates it signs (the aggregation layer's front proxy: the apiserver's client certificate
// towards metrics-server). Written in DER by hand on Node's crypto (P-256 keys, ECDSA with SHA-256),
// so no tool beyond Node is needed.
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

/** A certificate and its key, both PEM (the key PKCS #8). */
export interface CertKey {
  cert: string;
  key: string;
}

export interface CertOptions {
  /** The subject's common name (the user name a client certificate authenticates as). */
  commonName: string;
  /** Validity, from an hour ago (clock skew) to this many days from now. */
  days?: number;
}

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

const tlv = (tag: number, ...parts: Buffer[]): Buffer => {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
};
const seq = (...parts: Buffer[]): Buffer => tlv(0x30, ...parts);

/** A non-negative INTEGER from big-endian bytes (a leading zero when the high bit is set). */
function integer(bytes: Buffer): Buffer {
  let b = bytes;
  while (b.length > 1 && b[0] === 0 && b[1] < 0x80) b = b.subarray(1);
  return tlv(0x02, b[0] >= 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a + b];
  for (const n of rest) {
    const chunk = [n & 0x7f];
    for (let v = n >>> 7; v > 0; v >>>= 7) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

const bitString = (unusedBits: number, bytes: Buffer): Buffer => tlv(0x03, Buffer.from([unusedBits]), bytes);

/** UTCTime, YYMMDDHHMMSSZ (dates before 2050). */
function utcTime(d: Date): Buffer {
  const two = (n: number): string => String(n).padStart(2, '0');
  return tlv(0x17, Buffer.from(`${two(d.getUTCFullYear() % 100)}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}${two(d.getUTCSeconds())}Z`, 'ascii'));
}

const name = (commonName: string): Buffer => seq(tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(commonName, 'utf8')))));

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));
}

const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));

function certificate(subject: string, issuer: string, publicKey: KeyObject, signer: KeyObject, ca: boolean, days: number): string {
  const now = Date.now();
  const extensions = ca
    ? [
        extension('2.5.29.19', true, seq(tlv(0x01, Buffer.from([0xff])))), // basicConstraints: CA
        extension('2.5.29.15', true, bitString(1, Buffer.from([0x86]))), // keyUsage: digitalSignature, keyCertSign, cRLSign
      ]
    : [
        extension('2.5.29.19', true, seq()), // basicConstraints: not a CA
        extension('2.5.29.15', true, bitString(7, Buffer.from([0x80]))), // keyUsage: digitalSignature
        extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.2'))), // extKeyUsage: clientAuth
      ];
  const tbs = seq(
    tlv(0xa0, integer(Buffer.from([2]))), // v3
    integer(Buffer.concat([Buffer.from([0x01]), randomBytes(15)])),
    ECDSA_SHA256,
    name(issuer),
    seq(utcTime(new Date(now - 3600_000)), utcTime(new Date(now + days * 86_400_000))),
    name(subject),
    publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...extensions)),
  );
  const der = seq(tbs, ECDSA_SHA256, bitString(0, sign('sha256', tbs, signer)));
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
}

function keyPair(): { publicKey: KeyObject; privateKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' });
}

const pem = (k: KeyObject): string => k.export({ type: 'pkcs8', format: 'pem' }).toString();

/** A self-signed CA. */
export function makeCa(opts: CertOptions): CertKey {
  const { publicKey, privateKey } = keyPair();
  return { cert: certificate(opts.commonName, opts.commonName, publicKey, privateKey, true, opts.days ?? 3650), key: pem(privateKey) };
}

/** A client certificate (extKeyUsage clientAuth) signed by `ca`. */
export function issueClientCert(ca: CertKey, caCommonName: string, opts: CertOptions): CertKey {
  const { publicKey, privateKey } = keyPair();
  return { cert: certificate(opts.commonName, caCommonName, publicKey, createPrivateKey(ca.key), false, opts.days ?? 3650), key: pem(privateKey) };
}
