"""Tasks and results signed with the class key (HMAC-SHA256), so the broker need not be trusted.

Whoever can reach the broker can put messages into it: a runner that read the broker's URL could
send a worker a task of its own, or the sender a result it made up for itself or a classmate. The
sender and its workers share a key that never travels through the broker; each task (its id, the
class it belongs to, the runner's text and the settings) and each result (the task's id, the
class, the outcome) is sent with an HMAC of it under that key, and a message whose HMAC does not
verify is dropped.

Celery's own message signing (the `auth` serializer) would need a certificate and private key per
machine, and a certificate store on every one of them, to say no more than this does: the sender
and the workers are one party, so one shared secret is enough. Our own payloads are also all that
needs it: results do not go through Celery's result backend at all (distributed.py).

A sealed message is JSON: the signed text as it was signed, and its HMAC; the text is read only
once its HMAC verifies, so nothing depends on JSON coming out byte for byte the same twice.
"""

import hashlib
import hmac
import json
from typing import Any, Dict, Optional

TASK, RESULT = "task", "result"  # which of the two a message is: a task's HMAC never passes for a result


def seal(key: bytes, kind: str, content: Dict) -> str:
    text = json.dumps(content, sort_keys=True)
    return json.dumps({"text": text, "hmac": _mac(key, kind, text)})


def unseal(key: bytes, kind: str, sealed: Any) -> Optional[Dict]:
    """What `sealed` holds if it was sealed with `key` as `kind`; None for anything else."""
    try:
        message = json.loads(sealed)
        text, mac = message["text"], message["hmac"]
        if not (isinstance(text, str) and isinstance(mac, str)):
            return None
        if not hmac.compare_digest(_mac(key, kind, text).encode(), mac.encode("utf-8", "replace")):
            return None
        content = json.loads(text)
    except (TypeError, ValueError, KeyError):
        return None
    return content if isinstance(content, dict) else None


def _mac(key: bytes, kind: str, text: str) -> str:
    return hmac.new(key, kind.encode() + b"\0" + text.encode("utf-8"), hashlib.sha256).hexdigest()
