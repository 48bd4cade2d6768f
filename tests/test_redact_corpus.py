"""The labelled redaction corpus: synthetic secrets in realistic contexts, and hard negatives.

Every value is generated here, at test time, from the documented token
formats with a seeded random source — no string that looks like a live
credential is stored in the repository. A positive case is a context
template filled with one or two secrets; it passes when no 10-character
piece of any secret survives and, where the template allows, the text
around each secret is kept byte for byte. A negative case must come back
byte-identical with nothing counted.
"""

import base64
import hashlib
import json
import random
import re
import string
import uuid

import pytest

from khaelor.redact import Redactions, redact_text, redact_value

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def pick(rng: random.Random, alphabet: str, count: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(count))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pem_body(rng: random.Random, lines: int) -> list[str]:
    return [pick(rng, B64, 64) for _ in range(lines)] + [pick(rng, B64, 20) + "=="]


def pem(rng: random.Random, label: str) -> str:
    return "\n".join([f"-----BEGIN {label}-----", *pem_body(rng, 6), f"-----END {label}-----"])


def jwt(rng: random.Random) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": pick(rng, ALNUM, 10), "iat": rng.randrange(10**9, 2 * 10**9)}).encode())
    return f"{header}.{payload}.{b64url(rng.randbytes(32))}"


def human_password(rng: random.Random) -> str:
    words = ["Kestrel", "harbor", "Meadow", "copper", "Lantern", "violet", "Quarry", "ember"]
    return f"{rng.choice(words)}{rng.choice('!#%&*@')}{rng.choice(words).lower()}{rng.randrange(100, 9999)}"


# kind → generator of a format-valid fake value
SECRETS = {
    "anthropic-api": lambda r: "sk-ant-api03-" + pick(r, URLSAFE, 93) + "AA",
    "anthropic-admin": lambda r: "sk-ant-admin01-" + pick(r, URLSAFE, 93) + "AA",
    "anthropic-oauth": lambda r: "sk-ant-oat01-" + pick(r, URLSAFE, 95),
    "openai-project": lambda r: "sk-proj-" + pick(r, URLSAFE, 74) + "T3BlbkFJ" + pick(r, URLSAFE, 74),
    "openai-legacy": lambda r: "sk-" + pick(r, ALNUM, 20) + "T3BlbkFJ" + pick(r, ALNUM, 20),
    "github-pat": lambda r: "ghp_" + pick(r, ALNUM, 36),
    "github-oauth": lambda r: "gho_" + pick(r, ALNUM, 36),
    "github-app": lambda r: "ghs_" + pick(r, ALNUM, 36),
    "github-fine-grained": lambda r: "github_pat_" + pick(r, ALNUM, 22) + "_" + pick(r, ALNUM, 59),
    "gitlab-pat": lambda r: "glpat-" + pick(r, URLSAFE, 20),
    "gitlab-runner": lambda r: "glrt-" + pick(r, URLSAFE, 20),
    "slack-bot": lambda r: f"xoxb-{r.randrange(10**11, 10**12)}-{r.randrange(10**11, 10**12)}-{pick(r, ALNUM, 24)}",
    "slack-app": lambda r: f"xapp-1-A{pick(r, string.ascii_uppercase + string.digits, 10)}-{r.randrange(10**12, 10**13)}-"
                           + pick(r, "0123456789abcdef", 64),
    "stripe-live": lambda r: "sk_live_" + pick(r, ALNUM, 24),
    "stripe-restricted": lambda r: "rk_live_" + pick(r, ALNUM, 99),
    "stripe-webhook": lambda r: "whsec_" + pick(r, ALNUM, 32),
    "aws-key-id": lambda r: "AKIA" + pick(r, string.ascii_uppercase + "234567", 16),
    "aws-temp-key-id": lambda r: "ASIA" + pick(r, string.ascii_uppercase + "234567", 16),
    "aws-session": lambda r: "IQoJb3JpZ2luX2Vj" + pick(r, B64, 300),
    "google-api": lambda r: "AIza" + pick(r, URLSAFE, 35),
    "google-oauth": lambda r: "ya29." + pick(r, URLSAFE, 120),
    "google-client-secret": lambda r: "GOCSPX-" + pick(r, URLSAFE, 28),
    "huggingface": lambda r: "hf_" + pick(r, string.ascii_letters, 34),
    "npm": lambda r: "npm_" + pick(r, ALNUM, 36),
    "pypi": lambda r: "pypi-AgEIcHlwaS5vcmc" + pick(r, URLSAFE, 150),
    "twilio-key": lambda r: "SK" + pick(r, "0123456789abcdef", 32),
    "sendgrid": lambda r: "SG." + pick(r, URLSAFE, 22) + "." + pick(r, URLSAFE, 43),
    "jwt": jwt,
    "databricks": lambda r: "dapi" + pick(r, "0123456789abcdef", 32),
    "digitalocean": lambda r: "dop_v1_" + pick(r, "0123456789abcdef", 64),
    "shopify": lambda r: "shpat_" + pick(r, "0123456789abcdef", 32),
}
# values with no recognisable shape: found only through their context
CONTEXT_SECRETS = {
    "password": human_password,
    "aws-secret": lambda r: pick(r, B64, 40),
    "twilio-auth": lambda r: pick(r, "0123456789abcdef", 32),
    "azure-account-key": lambda r: base64.b64encode(r.randbytes(64)).decode(),
    "generic-token": lambda r: pick(r, ALNUM, 32),
}

# contexts for any secret: (name, template, exact) — exact: the text around the secret must survive unchanged
TOKEN_CONTEXTS = [
    ("shell-export", "$ export SERVICE_CREDENTIAL={s}\n$ ./deploy.sh --env prod\n", True),
    ("env-file", "# production settings\nAPI_URL=https://api.example.org\nSERVICE_KEY={s}\nDEBUG=false\n", True),
    ("yaml", "service:\n  name: billing\n  credentials:\n    value: {s}\n  replicas: 3\n", True),
    ("json-config", '{{\n  "endpoint": "https://api.example.org",\n  "value": "{s}",\n  "retries": 3\n}}', True),
    ("python", 'client = Client(base_url="https://api.example.org", key="{s}")\nclient.ping()\n', True),
    ("javascript", "const client = new Client({{ apiKey: '{s}', timeout: 3000 }});\n", True),
    ("stack-trace", 'Traceback (most recent call last):\n  File "app.py", line 12, in <module>\n'
                    '    connect("{s}")\nValueError: rejected credential {s} for host db.internal\n', True),
    ("prose", "I pasted my key {s} into the chat by mistake, please rotate it.", True),
    ("cjk-prose", "密钥是「{s}」。请不要分享它，谢谢！", True),
    ("accents-emoji", "Clé d'accès: {s} — ne pas partager 🙏 (café ouvert)", True),
    ("ansi", "\x1b[32mOK\x1b[0m using token \x1b[1;33m{s}\x1b[0m for upload\n", True),
    ("json-escaped-line", '{{"type":"tool_result","content":"token loaded: {s}\\nnext step"}}', True),
    ("markdown", "Use this in the header:\n\n```\n{s}\n```\n\nThen restart the worker.", True),
    ("csv", "name,secret,created\nci-bot,{s},2026-01-04\n", True),
]
CONTEXT_TEMPLATES = {
    "password": [
        ("dotenv", "DB_HOST=db.internal\nDB_PASSWORD={s}\nDB_PORT=5432\n", True),
        ("yaml", "database:\n  user: app\n  password: {s}\n  pool: 5\n", True),
        ("json", '{{"user": "app", "password": "{s}", "pool": 5}}', True),
        ("python", 'conn = psycopg.connect(user="app", password="{s}", host="db")\n', True),
        ("postgres-url", "DATABASE_URL=postgres://app:{s}@db.internal:5432/billing\n", True),
        ("mysql-url", "mysql://root:{s}@127.0.0.1:3306/test", True),
        ("curl-user", "curl -u deploy:{s} https://ci.example.org/api/build\n", True),
        ("docker-env", "docker run -e POSTGRES_PASSWORD={s} -p 5432:5432 postgres:16\n", True),
        ("cli-flag", "mysqldump --user=root --password {s} billing > dump.sql\n", True),
        ("conn-string", "Server=tcp:db.example.net,1433;User Id=app;Password={s};Encrypt=True;", True),
        ("toml", '[database]\nuser = "app"\npassword = "{s}"\n', True),
        ("escaped-json", '{{"content":"{{\\"user\\": \\"app\\", \\"password\\": \\"{s}\\"}}"}}', True),
        ("cjk", "数据库密码 password: {s}，请保管好。", True),
        ("redis-url", "REDIS_URL=redis://:{s}@cache.internal:6379/0", True),
    ],
    "aws-secret": [
        ("credentials-file", "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {s}\n", True),
        ("env", "AWS_SECRET_ACCESS_KEY={s}\nAWS_REGION=eu-west-1\n", True),
        ("json", '{{"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "{s}", "Expiration": "2026-01-01"}}', True),
    ],
    "twilio-auth": [
        ("env", "TWILIO_ACCOUNT_SID=AC{sid}\nTWILIO_AUTH_TOKEN={s}\n", True),
        ("python", 'client = Client("AC{sid}", auth_token="{s}")\n', True),
    ],
    "azure-account-key": [
        ("conn-string", "DefaultEndpointsProtocol=https;AccountName=billing;AccountKey={s};EndpointSuffix=core.windows.net",
         True),
        ("env", 'AZURE_STORAGE_CONNECTION_STRING="AccountName=billing;AccountKey={s}"', True),
    ],
    "generic-token": [
        ("header-bearer", 'curl -H "Authorization: Bearer {s}" https://api.example.org/v1/items\n', True),
        ("header-token", "Authorization: token {s}\nAccept: application/json\n", True),
        ("python-headers", 'requests.get(url, headers={{"Authorization": "Bearer {s}"}})\n', True),
        ("x-api-key", "X-Api-Key: {s}\nContent-Type: application/json\n", True),
        ("private-token", "curl --header 'PRIVATE-TOKEN: {s}' https://gitlab.example.com/api/v4/projects\n", True),
        ("cookie", "Cookie: sessionid={s}; csrftoken=abc; theme=dark\n", False),
        ("set-cookie", "Set-Cookie: session={s}; Path=/; HttpOnly; Secure; SameSite=Lax\n", True),
        ("query", "GET https://api.example.org/v1/export?format=csv&access_token={s}&page=2 HTTP/1.1\n", True),
        ("git-remote", "origin\thttps://x-access-token:{s}@github.com/acme/app.git (fetch)\n", True),
        ("sas", "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sig={s}\n", True),
        ("yaml-token", "registry:\n  token: {s}\n", True),
        ("npmrc", "//registry.npmjs.org/:_authToken={s}\n", True),
        ("kubectl", "kubectl create secret generic api --from-literal=api_key={s}\n", True),
        ("camel-json", '{{"clientSecret": "{s}", "clientId": "web-app"}}', True),
        ("go", 'cfg := Config{{APIKey: "{s}", Region: "eu"}}\n', True),
        ("proxy-auth", "Proxy-Authorization: Basic {s}\n", True),
        ("signing-key", "JWT_SIGNING_KEY={s}\n", True),
        ("consumer-key", "oauth:\n  consumer.key: {s}\n", True),
        ("encryption-key", '{{"encryptionKey": "{s}", "algorithm": "AES-256"}}', True),
        ("cookie-flag", "Cookie: debug; sessionid={s}\n", True),
    ],
}


def positive_cases() -> list[tuple[str, str, list[str], bool]]:
    """(id, text, secrets, exact) for every labelled case."""
    rng = random.Random(20261129)
    cases = []
    for kind, make in SECRETS.items():
        for name, template, exact in TOKEN_CONTEXTS:
            value = make(rng)
            cases.append((f"{kind}/{name}", template.format(s=value), [value], exact))
    for kind, templates in CONTEXT_TEMPLATES.items():
        for name, template, exact in templates:
            value = CONTEXT_SECRETS[kind](rng)
            text = template.format(s=value, sid=pick(rng, "0123456789abcdef", 32))
            cases.append((f"{kind}/{name}", text, [value], exact))
    cases += structural_cases(rng)
    return cases


def structural_cases(rng: random.Random) -> list[tuple[str, str, list[str], bool]]:
    """Private keys, webhooks, service accounts and JSON serialized inside strings."""
    cases = []
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY",
                  "ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "DSA PRIVATE KEY"):
        block = pem(rng, label)
        cases.append((f"pem/{label}", f"$ cat id_key\n{block}\n$ ls\n", [block], True))
        escaped = json.dumps({"content": block})
        cases.append((f"pem-json/{label}", escaped, [json.dumps(block)[1:-1]], True))
        indented = "\n".join("    " + line for line in block.split("\n"))
        cases.append((f"pem-yaml/{label}", f"tls:\n  key: |\n{indented}\n  cert: cert.pem\n",
                      [line.strip() for line in block.split("\n")[1:-1]], False))
    truncated = pem(rng, "RSA PRIVATE KEY").split("\n")[:4]
    cases.append(("pem/truncated", "$ head -4 key.pem\n" + "\n".join(truncated) + "\n",
                  ["\n".join(truncated[1:])], False))
    for kind in ("services", "workflows"):
        path = f"{kind}/T{pick(rng, string.ascii_uppercase, 8)}/B{pick(rng, string.ascii_uppercase, 8)}/{pick(rng, ALNUM, 24)}"
        cases.append((f"slack-webhook/{kind}", f"curl -X POST https://hooks.slack.com/{path} -d @msg.json", [path], True))
    for index in range(6):
        key, key_id = pem(rng, "PRIVATE KEY"), pick(rng, "0123456789abcdef", 40)
        account = {"type": "service_account", "project_id": "billing-42", "private_key_id": key_id,
                   "private_key": key + "\n", "client_email": "ci@billing-42.iam.gserviceaccount.com"}
        cases.append((f"service-account/{index}", json.dumps(account, indent=2),
                      [key_id, json.dumps(key)[1:-1]], False))
    for index in range(14):
        token, password = SECRETS["github-pat"](rng), human_password(rng)
        inner = json.dumps({"tool": "http", "headers": {"Authorization": f"Bearer {token}"}, "db": {"password": password}})
        for depth in range(index % 3):
            inner = json.dumps({"content": inner})
        cases.append((f"json-in-string/{index}", json.dumps({"type": "tool_result", "content": inner}),
                      [token, password], False))
    basic = base64.b64encode(f"deploy:{human_password(rng)}".encode()).decode()
    cases.append(("basic-auth", f"Authorization: Basic {basic}\n", [basic], True))
    return cases


def negative_cases() -> list[tuple[str, str]]:
    """(id, text) of hard negatives: public identifiers, hashes, placeholders, ordinary URLs and code."""
    rng = random.Random(7)
    cases = []
    for index in range(12):
        sha = hashlib.sha1(rng.randbytes(8)).hexdigest()
        cases.append((f"git-log/{index}", f"commit {sha}\nAuthor: Dev <dev@example.org>\n\n    fix the parser\n"))
        cases.append((f"uuid/{index}", f"request {uuid.UUID(bytes=rng.randbytes(16))} finished in 12ms"))
        digest = base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode()
        cases.append((f"lockfile/{index}", f'"node_modules/left-pad": {{\n  "version": "1.3.{index}",\n'
                                          f'  "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.{index}.tgz",\n'
                                          f'  "integrity": "sha512-{digest}"\n}}'))
        cases.append((f"go-sum/{index}", f"golang.org/x/text v0.{index}.0 h1:{base64.b64encode(rng.randbytes(32)).decode()}"))
        cases.append((f"image/{index}", f'{{"type": "image", "data": "data:image/png;base64,'
                                       f'{base64.b64encode(b"PNG" + rng.randbytes(600)).decode()}"}}'))
        cases.append((f"agent-ids/{index}", json.dumps({"id": "msg_01" + pick(rng, ALNUM, 22),
                                                        "tool_use_id": "toolu_01" + pick(rng, ALNUM, 22),
                                                        "request_id": "req_011C" + pick(rng, ALNUM, 20)})))
        cases.append((f"sha256/{index}", f"sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()}  dist/app.tar.gz"))
        cases.append((f"thinking-signature/{index}", json.dumps({"type": "thinking", "thinking": "Check the tests.",
                                                                 "signature": "EqQB" + pick(rng, B64, 200)})))
        cases.append((f"url/{index}", f"https://example.org/search?q=parser+{index}&page={index}&utm_source=news&v=2"))
        cases.append((f"etag/{index}", f'ETag: "{hashlib.md5(rng.randbytes(8)).hexdigest()}"\nCache-Control: max-age=60'))
        cases.append((f"public-key/{index}", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + pick(rng, B64, 43) + " dev@laptop"))
        cases.append((f"stripe-publishable/{index}", "Stripe.setPublishableKey('pk_live_" + pick(rng, ALNUM, 24) + "');"))
    fixed = [
        ("placeholder-env", "OPENAI_API_KEY=YOUR_API_KEY\nANTHROPIC_API_KEY=<your-key>\n"),
        ("placeholder-var", 'export GITHUB_TOKEN="${GITHUB_TOKEN}"\n'),
        ("placeholder-template", "token: {{ secrets.DEPLOY_TOKEN }}\n"),
        ("placeholder-mask", "password: ********\napi_key: xxxxxxxxxxxxxxxx\n"),
        ("placeholder-dots", "Set ANTHROPIC_API_KEY=sk-ant-... before running."),
        ("placeholder-bearer", 'curl -H "Authorization: Bearer $TOKEN" https://api.example.org\n'),
        ("placeholder-fstring", 'headers = {"Authorization": f"Bearer {token}"}\n'),
        ("env-reference", 'api_key = os.environ["OPENAI_API_KEY"]\ntoken = process.env.GITHUB_TOKEN\n'),
        ("code-getpass", "password = getpass.getpass()\nsecret = load_secret()\n"),
        ("code-attribute", "self.token = config.token\n"),
        ("token-counts", '{"input_tokens": 1200, "output_tokens": 80, "max_tokens": 4096}'),
        ("password-policy", "Passwords must be at least 12 characters; reset your password at https://example.org/reset."),
        ("aws-docs-example", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
                             "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
        ("public-key-pem", "-----BEGIN PUBLIC KEY-----\n" + "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A" * 2 + "\n-----END PUBLIC KEY-----"),
        ("certificate", "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----"),
        ("docker-user", "docker run -u 1000:1000 -v $PWD:/src node:20 npm test\n"),
        ("git-push", "git push -u origin main:main\n"),
        ("pwd", "PWD=/home/dev/projects/app\nOLDPWD=/home/dev\n"),
        ("k8s-ref", "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db\n        key: password\n"),
        ("type-annotation", "def login(user: str, password: str) -> Session: ...\n"),
        ("ts-interface", "interface Credentials {\n  token: string;\n  password?: string;\n}\n"),
        ("prose-token", "The tokenizer splits text into tokens; the secret sauce is caching."),
        ("keybinding", '{"key": "ctrl+shift+down", "command": "editor.action.copyLinesDownAction"}'),
        ("css", "a:hover { color: #ff00aa; background: url(data:image/gif;base64,R0lGODlhAQABAAAAACw=); }"),
        ("version-list", "anthropic==2.14.0\npathspec>=0.12\nmarkdown-it-py>=3\n"),
        ("redacted-already", "API_KEY=[REDACTED:credential]\nAuthorization: Bearer [REDACTED:authorization]\n"),
        ("sk-learn", "pip install scikit-learn  # not sk-learn-compatible-estimators-list-for-docs"),
        ("jwt-prose", "A JWT starts with eyJ because the header is base64 JSON."),
        ("ansi-build", "\x1b[1m\x1b[32m✓\x1b[0m built in 1.2s \x1b[2m(cache hit)\x1b[0m\n"),
        ("cjk-prose", "这个会话没有任何密钥，只有普通的说明文字。"),
        ("comparison", 'if password == "":\n    raise ValueError("empty")\n'),
        ("oauth-client-id", "client_id=1234567890-abc.apps.googleusercontent.com&redirect_uri=https://x.example/cb"),
        ("short-code-query", "https://httpstat.us/status?code=200"),
        ("code-call", "token = fetch_token(url)\napi_key=read_key['x']\nsecret_key=derive_key(seed, salt)\n"),
        ("key-in-words", "monkey=bananas12\nturkey: roasted123\nhockey=puck12345\nikey=abcdefgh12\n"),
    ]
    return cases + fixed


POSITIVES = positive_cases()
NEGATIVES = negative_cases()


def test_corpus_is_big_enough():
    secrets_count = sum(len(secrets) for _, _, secrets, _ in POSITIVES)
    assert secrets_count >= 300 and len(NEGATIVES) >= 150, (secrets_count, len(NEGATIVES))


def residue(secret: str, text: str) -> list[str]:
    """Pieces of `secret` (10 characters, every 5) still present in `text`."""
    pieces = [secret[i:i + 10] for i in range(0, max(len(secret) - 9, 1), 5)]
    return [piece for piece in pieces if len(piece) == 10 and piece in text]


@pytest.mark.parametrize("case_id,text,secrets,exact", POSITIVES, ids=[case[0] for case in POSITIVES])
def test_every_secret_is_removed(case_id, text, secrets, exact):
    found = Redactions()
    out = redact_text(text, found)
    for secret in secrets:
        assert not residue(secret, out), f"{case_id}: residue of the secret in {out!r}"
    assert found.total >= 1
    if exact:
        expected = text
        for secret in secrets:
            expected = expected.replace(secret, "\0")
        assert MARKER.sub("\0", out) == expected, f"{case_id}: context changed: {out!r}"


@pytest.mark.parametrize("case_id,text", NEGATIVES, ids=[case[0] for case in NEGATIVES])
def test_negatives_are_byte_identical(case_id, text):
    found = Redactions()
    assert redact_text(text, found) == text
    assert found.total == 0
    assert redact_value({"content": text, "nested": [text]}) == {"content": text, "nested": [text]}


def test_positives_inside_json_values_are_removed_too():
    for case_id, text, secrets, _ in POSITIVES:
        out = json.dumps(redact_value({"type": "tool_result", "content": text}))
        for secret in secrets:
            assert not residue(json.dumps(secret)[1:-1], out), case_id
