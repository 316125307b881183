// Drives every operation of the served OpenAPI document through openapi-fetch, typed by the
// `paths` openapi-typescript generated from it (schema.d.ts, written beside this file at test
// time), asserting on each answer, and verifies every webhook delivery with the
// `standardwebhooks` package across a secret rotation.
//
// Run by scripts/clients with API_URL, API_KEY (a key with every scope, of an account of its
// own), MEDIA_URL (serving picture.png, clip.mp4 and silence.wav), OPENAPI_DOCUMENT (the served
// document) and RECEIVER_CERT / RECEIVER_KEY (a certificate for 127.0.0.1 the dispatcher
// trusts). Prints one line per failed check and, last,
// `typescript: N of M operations driven, N passed, N failed`.

import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";

import createClient, { type Middleware } from "openapi-fetch";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

import type { components, paths } from "./schema";

type Schemas = components["schemas"];

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const API_URL = env("API_URL");
const MEDIA_URL = env("MEDIA_URL");
const SCOPES = [
  "moderate:prompt", "moderate:chat", "moderate:image", "moderate:video", "moderate:audio",
  "job:read", "usage:read", "webhook:manage", "settings:manage", "registry:check",
  "registry:submit", "review:decide", "job:appeal", "job:erase",
];
const SUFFIX = randomBytes(4).toString("hex");
const BLOCKED = `zorbleflax${SUFFIX}`;
const CATEGORY = `gambling_${SUFFIX}`;

class Failure extends Error {}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Failure(message);
}

const document = JSON.parse(readFileSync(env("OPENAPI_DOCUMENT"), "utf8")) as {
  paths: Record<string, Record<string, { operationId: string }>>;
};
const operations = new Set(
  Object.values(document.paths).flatMap((item) => Object.values(item).map((op) => op.operationId)),
);

/** Which operations were driven and which checks failed, per operation id. */
const tally = { driven: new Set<string>(), failed: new Map<string, string[]>(), current: "" };

// Every request is counted as its operation, found in the document by method and path template.
const record: Middleware = {
  onRequest({ request, schemaPath }) {
    const operation = document.paths[schemaPath]?.[request.method.toLowerCase()];
    tally.current = operation?.operationId ?? `${request.method} ${schemaPath}`;
    tally.driven.add(tally.current);
  },
};
const api = createClient<paths>({ baseUrl: API_URL, headers: { Authorization: `Bearer ${env("API_KEY")}` } });
// A second reviewer of the same account: an appeal goes to someone who has not decided the job.
const reviewer = createClient<paths>({ baseUrl: API_URL, headers: { Authorization: `Bearer ${env("REVIEWER_KEY")}` } });
const open = createClient<paths>({ baseUrl: API_URL });
api.use(record);
reviewer.use(record);
open.use(record);

/** Checks an answer's status and returns its parsed body. */
function answer<R extends { data?: unknown; error?: unknown; response: Response }>(
  result: R,
  status: number,
): NonNullable<R["data"]> {
  check(
    result.response.status === status,
    `answered ${result.response.status}, not ${status}: ${String(JSON.stringify(result.error ?? result.data)).slice(0, 300)}`,
  );
  return result.data as NonNullable<R["data"]>;
}

/**
 * A multipart/form-data body as OpenAPI describes one: each property a part, an array one part
 * per element, an object as JSON (openapi-fetch leaves multipart serialisation to the caller).
 */
function multipart(body: Record<string, unknown>): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(body)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined) form.append(name, typeof item === "object" ? JSON.stringify(item) : String(item));
    }
  }
  return form;
}

type Received = { path: string; headers: Record<string, string>; body: string; signedBy?: "old" | "both" };

/** An HTTPS receiver on 127.0.0.1 that records every request and answers 200. */
async function startReceiver() {
  const received: Received[] = [];
  const server = createServer({ cert: readFileSync(env("RECEIVER_CERT")), key: readFileSync(env("RECEIVER_KEY")) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) headers[name] = String(value);
      received.push({ path: req.url ?? "", headers, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(200, { "content-length": "2" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    received,
    server,
    url: (path: string) => `https://127.0.0.1:${port}${path}`,
    /** The requests received on `path`, once there are `count` of them. */
    async waitFor(path: string, count = 1, withinMs = 30_000): Promise<Received[]> {
      const deadline = Date.now() + withinMs;
      for (;;) {
        const got = received.filter((r) => r.path === path);
        if (got.length >= count) return got;
        if (Date.now() > deadline) throw new Failure(`${count} deliveries to ${path} did not arrive (got ${got.length})`);
        await sleep(100);
      }
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitForJob(id: string): Promise<Schemas["JobView"]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const job = answer(await api.GET("/api/v1/job/{id}", { params: { path: { id } } }), 200);
    if (job.status === "completed" || job.status === "failed" || Date.now() > deadline) return job;
    await sleep(100);
  }
}

/** Verifies one delivery with standardwebhooks and this secret alone; returns the payload. */
function verify(request: Received, secret: string): Record<string, unknown> {
  return new Webhook(secret).verify(request.body, request.headers) as Record<string, unknown>;
}

function refused(request: Received, secret: string): boolean {
  try {
    verify(request, secret);
  } catch (e) {
    if (e instanceof WebhookVerificationError) return true;
    throw e;
  }
  return false;
}

/** The rows of a CSV text (RFC 4180: quoted cells may hold commas, quotes and line breaks). */
function parseCsv(text: string): Record<string, string>[] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (cell += '"'), i++;
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") row.push(cell), (cell = "");
    else if (c === "\n") row.push(cell), rows.push(row), (row = []), (cell = "");
    else if (c !== "\r") cell += c;
  }
  if (cell || row.length) row.push(cell), rows.push(row);
  const [header, ...body] = rows;
  return body.map((cells) => Object.fromEntries(header.map((name, i) => [name.replace(/^\ufeff/, ""), cells[i]])));
}

async function main(): Promise<number> {
  const receiver = await startReceiver();
  const jobs = new Map<string, string>();
  const state: { old?: string; fresh?: string; category?: string; verified?: number; reviewVerified?: number } = {};

  const publicOperations = async () => {
    const health = answer(await open.GET("/health"), 200);
    check(health.status === "ok" && health.checks.postgres === "ok" && health.checks.redis === "ok", "health");
    const metrics = answer(await open.GET("/metrics", { parseAs: "text" }), 200);
    check(metrics.includes("# TYPE"), "the metrics are not Prometheus text");
    // The document is described as a free-form object.
    const served = answer(await open.GET("/api/v1/openapi.json"), 200) as { openapi?: string; info?: { version?: string } };
    check(served.openapi === "3.1.0" && served.info?.version === "1.0.0", "not the 3.1.0 document");
  };

  const account = async () => {
    const me = answer(await api.GET("/api/v1/me"), 200);
    check([...me.scopes].sort().join() === [...SCOPES].sort().join(), `scopes ${me.scopes}`);
    check(me.rate_per_minute === 1_000_000, `rate ${me.rate_per_minute}`);
  };

  const policies = async () => {
    const created = answer(
      await api.POST("/api/v1/custom-categories", {
        body: { name: CATEGORY, description: "Games of chance for money.", keywords: ["roulette"] },
      }),
      201,
    );
    check(created.name === CATEGORY && created.keywords.join() === "roulette" && created.enabled, "created");
    const changed = answer(
      await api.PATCH("/api/v1/custom-categories/{id}", {
        params: { path: { id: created.id } },
        body: { keywords: ["roulette", "blackjack"] },
      }),
      200,
    );
    check(changed.id === created.id && changed.keywords.join() === "roulette,blackjack", "changed");
    const listed = answer(await api.GET("/api/v1/custom-categories"), 200);
    check(listed.categories.map((c) => c.name).join() === CATEGORY, "listed categories");
    state.category = created.id;
    let terms = answer(await api.POST("/api/v1/blocklist", { body: { terms: [BLOCKED, "second term"] } }), 200);
    check(terms.terms.includes(BLOCKED) && terms.terms.includes("second term"), `terms ${terms.terms}`);
    terms = answer(await api.DELETE("/api/v1/blocklist", { body: { terms: ["second term"] } }), 200);
    check(terms.terms.join() === BLOCKED, `terms after removal ${terms.terms}`);
    terms = answer(await api.GET("/api/v1/blocklist"), 200);
    check(terms.terms.join() === BLOCKED, `listed terms ${terms.terms}`);
  };

  const webhookSettings = async () => {
    const secret = answer(await api.POST("/api/v1/me/webhook-secrets/reveal"), 200);
    check(secret.secret.startsWith("whsec_") && Buffer.from(secret.secret.slice(6), "base64").length === 24, "secret");
    const again = answer(await api.POST("/me/webhook-secrets/reveal"), 200);
    check(again.secret === secret.secret && again.id === secret.id, "the two reveals differ");
    state.old = secret.secret;
    const registered = answer(await api.POST("/api/v1/webhook/register", { body: { url: receiver.url("/global") } }), 200);
    check(registered.url === receiver.url("/global"), `registered ${registered.url}`);
    const current = answer(await api.GET("/api/v1/webhook/register"), 200);
    check(current.url === receiver.url("/global"), `current ${current.url}`);
  };

  const accepted = (kind: string, result: { data?: Schemas["Accepted"]; error?: unknown; response: Response }) => {
    const job = answer(result, 202);
    check(job.status === "queued", `submission status ${job.status}`);
    jobs.set(kind, job.job_id);
  };

  const submissionsBeforeRotation = async () => {
    accepted("prompt", await api.POST("/api/v1/moderate/prompt", {
      body: { text: "A friendly note about the weather.", webhook_url: receiver.url("/prompt") },
      bodySerializer: multipart,
    }));
    // No webhook_url: the chat goes to the account's global URL.
    accepted("chat", await api.POST("/api/v1/moderate/chat", {
      body: {
        messages: [
          { role: "system", content: "Be kind." },
          { role: "user", content: "Shall we play roulette?" },
          { role: "assistant", content: "Maybe later." },
        ],
      },
      bodySerializer: multipart,
    }));
    accepted("image", await api.POST("/api/v1/moderate/image", {
      body: { image: `${MEDIA_URL}/picture.png`, webhook_url: receiver.url("/image") },
      bodySerializer: multipart,
    }));
    accepted("video", await api.POST("/api/v1/moderate/video", {
      body: { video: `${MEDIA_URL}/clip.mp4`, webhook_url: receiver.url("/video") },
      bodySerializer: multipart,
    }));
    accepted("audio", await api.POST("/api/v1/moderate/audio", {
      body: { audio: `${MEDIA_URL}/silence.wav`, webhook_url: receiver.url("/audio") },
      bodySerializer: multipart,
    }));
    for (const path of ["/prompt", "/global", "/image", "/video", "/audio"]) {
      for (const request of await receiver.waitFor(path)) request.signedBy = "old";
    }
  };

  const rotation = async () => {
    const rotated = answer(await api.POST("/api/v1/me/webhook-secrets/rotate"), 201);
    check(rotated.secret.startsWith("whsec_") && rotated.secret !== state.old, "the rotated secret");
    state.fresh = rotated.secret;
    const revealed = answer(await api.POST("/api/v1/me/webhook-secrets/reveal"), 200);
    check(revealed.secret === rotated.secret, "reveal does not show the new secret");
    const listed = answer(await api.GET("/api/v1/me/webhook-secrets"), 200);
    check(listed.secrets.map((s) => s.status).join() === "active,expiring", "secrets");
    check(listed.secrets[0].expires_at === null && listed.secrets[1].expires_at !== null, "expiry");
    check(listed.tolerance_seconds === 300 && listed.grace_hours === 24, "tolerance and grace");
  };

  const deliveriesAfterRotation = async () => {
    accepted("prohibited", await api.POST("/api/v1/moderate/prompt", {
      body: { text: `We say ${BLOCKED} and play blackjack.` },
      bodySerializer: multipart,
    }));
    for (const request of (await receiver.waitFor("/global", 2)).slice(1)) request.signedBy = "both";
    const first = answer(await api.GET("/api/v1/deliveries", { params: { query: { job_id: jobs.get("prompt") } } }), 200);
    check(first.deliveries.length === 1 && first.deliveries[0].status === "delivered", "the prompt's delivery");
    const id = first.deliveries[0].delivery_id;
    const resent = answer(await api.POST("/api/v1/deliveries/{id}/resend", { params: { path: { id } } }), 202);
    check(resent.delivery_id === id, "resend answered another delivery");
    for (const request of (await receiver.waitFor("/prompt", 2)).slice(1)) request.signedBy = "both";
    const deadline = Date.now() + 30_000;
    let detail: Schemas["DeliveryDetail"];
    for (;;) {
      detail = answer(await api.GET("/api/v1/deliveries/{id}", { params: { path: { id } } }), 200);
      if ((detail.attempts_log.length === 2 && detail.attempts_log[1].status_code === 200) || Date.now() > deadline) break;
      await sleep(100);
    }
    check(detail.status === "delivered" && detail.attempts === 2, `after the resend ${JSON.stringify(detail)}`);
    check(detail.attempts_log.map((a) => a.attempt).join() === "1,2", "attempt numbers");
    check(detail.attempts_log.every((a) => a.status_code === 200 && a.response_excerpt === "ok"), "attempt answers");
    const every = answer(await api.GET("/api/v1/deliveries", { params: { query: { status: "delivered", limit: 1000 } } }), 200);
    const delivered = every.deliveries.map((d) => d.job_id).sort().join();
    check(delivered === [...jobs.values()].sort().join() && every.next_cursor === null, `delivered jobs ${delivered}`);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const recovered = answer(await api.POST("/api/v1/deliveries/recover", { body: { since } }), 202);
    check(recovered.count === 0, `recovered ${recovered.count}: nothing was abandoned`);
  };

  const jobsCompleted = async () => {
    for (const [kind, id] of jobs) {
      const job = await waitForJob(id);
      check(job.status === "completed", `${kind} job ${job.status}: ${JSON.stringify(job.error)}`);
      const type = ["prompt", "chat", "prohibited"].includes(kind) ? "text" : kind;
      check(job.type === type && job.completed_at !== null, `${kind} type ${job.type}`);
      const custom = job.categories?.custom ?? {};
      if (kind === "image" || kind === "video") {
        check(job.categories?.ai_adult_general === false && job.categories?.underage === false, `${kind} categories`);
      }
      check(custom[CATEGORY] === (kind === "chat" || kind === "prohibited"), `${kind} custom ${JSON.stringify(custom)}`);
      if (kind === "prohibited") {
        check(job.is_prohibited === true && !job.reason?.includes(BLOCKED) && !!job.reason?.includes("blocklist"), `reason ${job.reason}`);
      } else if (kind === "chat") {
        check(job.is_prohibited === true && job.reason === `The content matches the custom category ${CATEGORY}.`, `reason ${job.reason}`);
      } else {
        check(job.is_prohibited === false && job.reason === undefined, `${kind} prohibited: ${job.reason}`);
      }
      const progress = answer(await api.GET("/api/v1/job/{id}/progress", { params: { path: { id } } }), 200);
      check(progress.stage === "done" && progress.status === "completed" && progress.attempts === 1, `${kind} progress`);
    }
  };

  const signatures = () => {
    const stranger = `whsec_${randomBytes(24).toString("base64")}`;
    check(receiver.received.length === 7, `${receiver.received.length} deliveries received, 7 expected`);
    const ids = new Set(jobs.values());
    for (const request of receiver.received) {
      const where = `${request.path} (${request.signedBy})`;
      const signatures = request.headers["webhook-signature"].split(" ");
      const payload = verify(request, state.old!);
      check(request.headers["webhook-id"] === payload.delivery_id, `${where}: webhook-id`);
      check(ids.has(payload.job_id as string) && payload.status === "completed", `${where}: payload`);
      check(refused(request, stranger), `${where}: a stranger's secret verifies`);
      if (request.signedBy === "old") {
        check(signatures.length === 1, `${where}: ${signatures.length} signatures before the rotation`);
        check(refused(request, state.fresh!), `${where}: the later secret verifies`);
      } else {
        check(signatures.length === 2, `${where}: ${signatures.length} signatures during the grace period`);
        verify(request, state.fresh!);
      }
    }
    state.verified = receiver.received.length;
  };

  const jobReads = async () => {
    const page = answer(await api.GET("/api/v1/jobs", { params: { query: { status: "completed", limit: 4 } } }), 200);
    check(page.jobs.length === 4 && typeof page.next_cursor === "string", "the first page");
    const rest = answer(
      await api.GET("/api/v1/jobs", { params: { query: { status: "completed", limit: 4, cursor: page.next_cursor! } } }),
      200,
    );
    const listed = [...page.jobs, ...rest.jobs].map((j) => j.job_id).sort().join();
    check(listed === [...jobs.values()].sort().join() && rest.next_cursor === null, `listed ${listed}`);
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const csv = answer(await api.GET("/api/v1/jobs/export", { params: { query: { from: day(-1), to: day(2) } }, parseAs: "text" }), 200);
    const rows = new Map(parseCsv(csv).map((r) => [r.job_id, r]));
    check([...rows.keys()].sort().join() === [...jobs.values()].sort().join(), `exported ${rows.size} rows`);
    check(rows.get(jobs.get("image")!)?.prompt === `${MEDIA_URL}/picture.png`, "the image row's prompt");
    check(!!rows.get(jobs.get("chat")!)?.prompt.includes("user: Shall we play roulette?"), "the chat row's prompt");
    check(rows.get(jobs.get("prohibited")!)?.is_prohibited === "true", "the prohibited row");
    const volume = answer(await api.GET("/api/v1/usage/volume", { params: { query: { period: "day" } } }), 200);
    const sum = (series: "prompt" | "image" | "video" | "audio" | "pre" | "post") =>
      volume.data.reduce((total, point) => total + point[series], 0);
    const totals = [sum("prompt"), sum("image"), sum("video"), sum("audio"), sum("pre"), sum("post")].join();
    check(totals === "3,1,1,1,0,0", `usage ${totals}`);
    check(volume.period === "day" && volume.bucket === "hour", `usage bucket ${volume.bucket}`);
  };

  const registry = async () => {
    const sha256 = createHash("sha256").update(`banned-${SUFFIX}@example.com`).digest("hex");
    const identifier = { type: "email" as const, sha256 };
    const found = answer(await api.POST("/api/v1/registry/check", { body: { identifiers: [identifier], context: "signup" } }), 200);
    check(found.match === false && found.signals.length === 0 && found.normalisation_version === 1, "check");
    const entry = answer(
      await api.POST("/api/v1/registry/entries", {
        body: { identifier, category: "payment_fraud", member_case_ref: `case-${SUFFIX}`, attest_human_review: true },
      }),
      201,
    );
    check(entry.status === "active" && entry.category === "payment_fraud" && entry.revoked_at === null, "entry");
    const listed = answer(await api.GET("/api/v1/registry/entries", { params: { query: { limit: 10 } } }), 200);
    check(listed.entries.map((e) => e.entry_id).join() === entry.entry_id && listed.next_cursor === null, "entries");
    const id = entry.entry_id;
    const got = answer(await api.GET("/api/v1/registry/entries/{id}", { params: { path: { id } } }), 200);
    check(got.member_case_ref === `case-${SUFFIX}`, "the entry read back");
    const revoked = answer(
      await api.POST("/api/v1/registry/entries/{id}/revoke", { params: { path: { id } }, body: { reason: "Reported in error." } }),
      200,
    );
    check(revoked.status === "revoked" && revoked.revoke_reason === "Reported in error.", "revoked");
  };

  const policyVersions = async () => {
    const overview = answer(await api.GET("/api/v1/policy"), 200);
    check(overview.active === 1 && overview.shadow === null, `policy ${JSON.stringify(overview)}`);
    const draft = answer(
      await api.POST("/api/v1/policy/versions", {
        body: {
          categories: { violence: { mode: "enforce", block_at: 0.7, review_at: 0.4 } },
          review: { sample_rate: 1.0 },
          note: "Review every job",
        },
      }),
      201,
    );
    check(draft.version === 2 && draft.status === "draft", `draft ${JSON.stringify(draft)}`);
    check(draft.categories.violence.block_at === 0.7 && draft.categories.violence.review_at === 0.4, "violence");
    const v = 2;
    const got = answer(await api.GET("/api/v1/policy/versions/{v}", { params: { path: { v } } }), 200);
    check(got.review.sample_rate === 1.0, "version 2's sample");
    const impact = answer(await api.GET("/api/v1/policy/versions/{v}/impact", { params: { path: { v } } }), 200);
    check(impact.jobs === jobs.size, `impact over ${impact.jobs} jobs, ${jobs.size} completed`);
    const shadowed = answer(await api.POST("/api/v1/policy/versions/{v}/shadow", { params: { path: { v } } }), 200);
    check(shadowed.status === "shadow", `shadow ${shadowed.status}`);
    answer(await api.DELETE("/api/v1/policy/shadow"), 204);
    const activated = answer(await api.POST("/api/v1/policy/versions/{v}/activate", { params: { path: { v } } }), 200);
    check(activated.status === "active", `activated ${activated.status}`);
    const events = answer(await api.GET("/api/v1/audit", { params: { query: { action: "policy.activated" } } }), 200);
    check(events.events.length === 1 && events.events[0].target.id === "2", `audit ${JSON.stringify(events.events)}`);
  };

  const reviewAndAppeal = async () => {
    // Every job is sampled now: this one goes to review when it completes.
    accepted("reviewed", await api.POST("/api/v1/moderate/prompt", {
      body: { text: "See you at the match tonight.", webhook_url: receiver.url("/review") },
      bodySerializer: multipart,
    }));
    const jobId = jobs.get("reviewed")!;
    const job = await waitForJob(jobId);
    check(job.review?.state === "pending" && job.review.reasons.join() === "sample", `review ${JSON.stringify(job.review)}`);
    const queue = answer(await api.GET("/api/v1/review/queue"), 200);
    check(queue.pending === 1 && queue.by_reason.sample === 1, `queue ${JSON.stringify(queue)}`);
    const listed = answer(await api.GET("/api/v1/review/items", { params: { query: { state: "pending" } } }), 200);
    check(listed.items.length === 1, `items ${listed.items.length}`);
    let claimed = answer(await api.POST("/api/v1/review/claim"), 200);
    check(claimed.job_id === jobId && claimed.state === "claimed", `claimed ${JSON.stringify(claimed)}`);
    const item = answer(await api.GET("/api/v1/review/items/{id}", { params: { path: { id: claimed.item_id } } }), 200);
    check(item.content.text === "See you at the match tonight.", `content ${JSON.stringify(item.content)}`);
    const released = answer(await api.POST("/api/v1/review/items/{id}/release", { params: { path: { id: claimed.item_id } } }), 200);
    check(released.state === "pending", `released ${released.state}`);
    claimed = answer(await api.POST("/api/v1/review/claim"), 200);
    const decided = answer(
      await api.POST("/api/v1/review/items/{id}/decide", {
        params: { path: { id: claimed.item_id } },
        body: { is_prohibited: true, note: "Spam in context." },
      }),
      200,
    );
    check(decided.revision === 1 && decided.changed, `decided ${JSON.stringify(decided)}`);
    const appealBody = { reason: "It was not spam.", appeal_ref: "t-1" };
    const appealed = answer(await api.POST("/api/v1/job/{id}/appeal", { params: { path: { id: jobId } }, body: appealBody }), 201);
    const again = answer(await api.POST("/api/v1/job/{id}/appeal", { params: { path: { id: jobId } }, body: appealBody }), 200);
    check(again.appeal_id === appealed.appeal_id, "the same appeal_ref answered another appeal");
    const appealItem = answer(await reviewer.POST("/api/v1/review/claim"), 200);
    check(appealItem.appeal_id === appealed.appeal_id, `the appeal's item ${JSON.stringify(appealItem)}`);
    const overturned = answer(
      await reviewer.POST("/api/v1/review/items/{id}/decide", {
        params: { path: { id: appealItem.item_id } },
        body: { is_prohibited: false, note: "Not spam after all." },
      }),
      200,
    );
    check(overturned.appeal_state === "overturned", `appeal ${overturned.appeal_state}`);
    const read = answer(await api.GET("/api/v1/appeals/{id}", { params: { path: { id: appealed.appeal_id } } }), 200);
    check(read.state === "overturned", `appeal state ${read.state}`);
    const history = answer(await api.GET("/api/v1/job/{id}/decisions", { params: { path: { id: jobId } } }), 200);
    check(history.decisions.map((d) => d.decided_by).join() === "model,review,appeal", "the decisions");
    // job.completed, job.revised twice and appeal.decided, each verified as a receiver would.
    const received = await receiver.waitFor("/review", 4);
    const events = received.map((r) => verify(r, state.fresh!).event as string).sort().join();
    check(events === "appeal.decided,job.completed,job.revised,job.revised", `events ${events}`);
    state.reviewVerified = received.length;
  };

  const erasure = async () => {
    const id = jobs.get("chat")!;
    const before = answer(await api.GET("/api/v1/job/{id}", { params: { path: { id } } }), 200);
    answer(await api.DELETE("/api/v1/job/{id}/content", { params: { path: { id } } }), 204);
    answer(await api.DELETE("/api/v1/job/{id}/content", { params: { path: { id } } }), 204);
    const after = answer(await api.GET("/api/v1/job/{id}", { params: { path: { id } } }), 200);
    check(
      after.status === before.status && after.is_prohibited === before.is_prohibited,
      "the decision stays",
    );
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const csv = answer(await api.GET("/api/v1/jobs/export", { params: { query: { from: day(-1), to: day(2) } }, parseAs: "text" }), 200);
    const rows = new Map(parseCsv(csv).map((r) => [r.job_id, r]));
    check(rows.get(id)?.prompt === "", "the erased chat's prompt is empty");
  };

  const endpointHealth = async () => {
    const paused = answer(await api.POST("/api/v1/webhook/pause"), 200);
    check(paused.state === "paused" && paused.held === 0, `paused ${JSON.stringify(paused)}`);
    const resumed = answer(await api.POST("/api/v1/webhook/resume"), 200);
    check(resumed.state === "active", `resumed ${JSON.stringify(resumed)}`);
    const disabled = answer(await api.POST("/api/v1/webhook/disable"), 200);
    check(
      disabled.state === "disabled" && disabled.disabled_reason === "manual",
      `disabled ${JSON.stringify(disabled)}`,
    );
    const enabled = answer(await api.POST("/api/v1/webhook/enable", { body: { replay: "held" } }), 200);
    check(enabled.state === "active" && enabled.disabled_reason === null, `enabled ${JSON.stringify(enabled)}`);
    const before = receiver.received.filter((r) => r.path === "/global").length;
    const ping = answer(await api.POST("/api/v1/webhook/test"), 202);
    check(ping.event === "ping", `ping ${JSON.stringify(ping)}`);
    const sent = (await receiver.waitFor("/global", before + 1)).at(-1)!;
    const payload = verify(sent, state.fresh!);
    check(payload.event === "ping" && payload.delivery_id === ping.delivery_id, `ping payload ${JSON.stringify(payload)}`);
    const current = answer(await api.GET("/api/v1/webhook/register"), 200);
    check(current.state === "active" && current.held === 0, `current ${JSON.stringify(current)}`);
  };

  const cleanup = async () => {
    answer(await api.DELETE("/api/v1/custom-categories/{id}", { params: { path: { id: state.category! } } }), 204);
    const listed = answer(await api.GET("/api/v1/custom-categories"), 200);
    check(listed.categories.length === 0, "the category is still listed");
    answer(await api.DELETE("/api/v1/webhook/register"), 204);
    const current = answer(await api.GET("/api/v1/webhook/register"), 200);
    check(current.url === null, `the global URL is still ${current.url}`);
  };

  const steps: [string, () => unknown][] = [
    ["public operations", publicOperations],
    ["the key", account],
    ["custom categories and blocklist", policies],
    ["webhook settings", webhookSettings],
    ["submissions before the rotation", submissionsBeforeRotation],
    ["rotation", rotation],
    ["deliveries after the rotation", deliveriesAfterRotation],
    ["jobs complete", jobsCompleted],
    ["signatures", signatures],
    ["job reads, export and usage", jobReads],
    ["registry", registry],
    ["policy versions and the audit log", policyVersions],
    ["review and appeals", reviewAndAppeal],
    ["content erasure", erasure],
    ["endpoint health", endpointHealth],
    ["clean-up", cleanup],
  ];
  for (const [title, body] of steps) {
    tally.current = "";
    try {
      await body();
    } catch (e) {
      // One step's failure is reported, and the others still run.
      const where = tally.current || title;
      const detail = e instanceof Failure ? e.message : String((e as Error).stack ?? e);
      tally.failed.set(where, [...(tally.failed.get(where) ?? []), `${title}: ${detail}`]);
      console.log(`FAILED ${where} (${title}): ${detail}`);
    }
  }
  // The dispatcher keeps its connections open: end them, or the process waits for them.
  receiver.server.close();
  receiver.server.closeAllConnections();

  for (const name of [...operations].filter((op) => !tally.driven.has(op)).sort()) {
    tally.failed.set(name, ["not driven"]);
    console.log(`FAILED ${name}: the document has it, the driver never called it`);
  }
  const passed = [...tally.driven].filter((op) => !tally.failed.has(op)).length;
  console.log(
    `typescript webhooks: ${state.verified ?? 0} deliveries verified with standardwebhooks across a rotation, ` +
      `${state.reviewVerified ?? 0} of review and appeals`,
  );
  console.log(`typescript: ${tally.driven.size} of ${operations.size} operations driven, ${passed} passed, ${tally.failed.size} failed`);
  return tally.failed.size === 0 ? 0 : 1;
}

process.exitCode = await main();
