// The harness's own certificates (test/cluster/certs.ts): a CA and a client certificate it signs,
// read back by Node's X.509 parser: names, validity, the CA flag, the signature and the key pair.
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { issueClientCert, makeCa } from '../cluster/certs.js';

test('a CA signs a client certificate for the front proxy that verifies against it', () => {
  const ca = makeCa({ commonName: 'test-ca', days: 30 });
  const client = issueClientCert(ca, 'test-ca', { commonName: 'front-proxy-client' });
  const caCert = new X509Certificate(ca.cert);
  const cert = new X509Certificate(client.cert);
  expect(caCert.ca).toBe(true);
  expect(caCert.subject).toBe('CN=test-ca');
  expect(cert.ca).toBe(false);
  expect({ subject: cert.subject, issuer: cert.issuer }).toEqual({ subject: 'CN=front-proxy-client', issuer: 'CN=test-ca' });
  expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
  expect(cert.checkIssued(caCert)).toBe(true);
  expect(cert.verify(caCert.publicKey)).toBe(true);
  expect(cert.verify(new X509Certificate(makeCa({ commonName: 'test-ca' }).cert).publicKey)).toBe(false);
  expect(cert.checkPrivateKey(createPrivateKey(client.key))).toBe(true);
  expect(createPublicKey(client.key).export({ type: 'spki', format: 'der' })).toEqual(cert.publicKey.export({ type: 'spki', format: 'der' }));
  const now = Date.now();
  expect(Date.parse(cert.validFrom)).toBeLessThan(now);
  expect(Date.parse(caCert.validTo)).toBeGreaterThan(now + 29 * 86_400_000);
  expect(Date.parse(caCert.validTo)).toBeLessThan(now + 31 * 86_400_000);
});
