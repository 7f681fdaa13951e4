// nginx as the benchmark's reference reverse proxy: writes a private config (every path inside one
// temp dir, one keep-alive upstream and one prefix location per model, production-ish buffering, or
// for server-sent events `proxy_buffering off`) and runs nginx in the foreground on one CPU.

import fs from 'node:fs';
import path from 'node:path';
import { descendants } from './procfs.js';
import { Child, spawnPinned } from './procs.js';

export interface NginxOptions {
  binary: string;
  /** Private prefix dir: config, pid, error log, temp paths. */
  dir: string;
  port: number;
  /** One location per model: calls whose path starts with `prefix` go to 127.0.0.1:`upstreamPort`. */
  routes: { name: string; prefix: string; upstreamPort: number; upstreamPath?: string }[];
  cpu: number;
  logDir: string;
  /**
   * Streamed answers (bench:llm): `proxy_buffering off`, so each event goes to the client as the model
   * sends it, and a read timeout of 30 minutes for long streams. Default: buffering on, as for predict.
   */
  streaming?: boolean;
  /** worker_connections (default 4096); each proxied call holds two. */
  workerConnections?: number;
}

const upstreamName = (name: string) => `model_${name.replace(/[^A-Za-z0-9]/g, '_')}`;

function upstreamBlock(name: string, port: number): string {
  return `  upstream ${upstreamName(name)} {
    server 127.0.0.1:${port};
    keepalive 64;
    keepalive_requests 10000;
    # nginx's default; shorter than the models' 65 s, so nginx closes idle sockets first.
    keepalive_timeout 60s;
  }
`;
}

/** `upstreamPath` (e.g. "/"): the part of the path matched by `prefix` is replaced by it (nginx's proxy_pass with a URI). */
function locationBlock(name: string, prefix: string, upstreamPath: string | undefined, readTimeout: string): string {
  return `    location ^~ ${prefix} {
      proxy_pass http://${upstreamName(name)}${upstreamPath ?? ''};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout ${readTimeout};
    }
`;
}

export function nginxConfig(o: NginxOptions): string {
  const p = (name: string) => path.join(o.dir, name);
  const asRoot = typeof process.geteuid === 'function' && process.geteuid() === 0;
  return `# predictgate bench: private nginx config (generated; see test/bench/nginx.ts)
${asRoot ? 'user root;' : ''}
worker_processes 1;
pid ${p('nginx.pid')};
error_log ${p('error.log')} warn;

${o.workerConnections ? `worker_rlimit_nofile ${2 * o.workerConnections};\n\n` : ''}events {
  worker_connections ${o.workerConnections ?? 4096};
}

http {
  access_log off;
  server_tokens off;
  sendfile on;
  tcp_nodelay on;
  keepalive_timeout 65s;
  keepalive_requests 10000;

  client_body_temp_path ${p('client_body')};
  proxy_temp_path ${p('proxy')};
  fastcgi_temp_path ${p('fastcgi')};
  uwsgi_temp_path ${p('uwsgi')};
  scgi_temp_path ${p('scgi')};

  # Request and response buffering on (nginx's defaults), with buffers sized so that ~1 MB bodies
  # stay in memory instead of spilling to temp files, as a tuned production proxy would.
  client_max_body_size 20m;
  client_body_buffer_size 2m;
  proxy_request_buffering on;
  proxy_buffering ${o.streaming ? 'off' : 'on'};
  proxy_buffer_size 16k;
  proxy_buffers 64 16k;
  proxy_busy_buffers_size 64k;

${o.routes.map((r) => upstreamBlock(r.name, r.upstreamPort)).join('\n')}
  server {
    listen 127.0.0.1:${o.port};
${o.routes.map((r) => locationBlock(r.name, r.prefix, r.upstreamPath, o.streaming ? '1800s' : '60s')).join('\n')}
    location / {
      return 404;
    }
  }
}
`;
}

export interface Nginx {
  master: Child;
  /** Master and worker pids (the worker does the proxying). */
  pids(): number[];
}

export function startNginx(o: NginxOptions): Nginx {
  for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
    fs.mkdirSync(path.join(o.dir, d), { recursive: true });
  }
  const conf = path.join(o.dir, 'nginx.conf');
  fs.writeFileSync(conf, nginxConfig(o));
  const master = spawnPinned('nginx', o.binary, ['-p', o.dir + '/', '-c', conf, '-g', 'daemon off;'], {
    cpu: o.cpu,
    logDir: o.logDir,
  });
  return {
    master,
    pids: () => [master.pid, ...descendants(master.pid)],
  };
}
