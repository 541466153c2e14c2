"""Call `sbert serve` with the official OpenAI client, and check its vectors against the library's own.

Shows: the service speaks OpenAI's /v1/embeddings, so any OpenAI client works unchanged; what it returns
equals `sbert.load().encode(...)` within float noise.
Run: start a server (`sbert serve --port 8080`, on 127.0.0.1), then
`python examples/openai_client.py [--url http://127.0.0.1:8080/v1] [--api-key KEY]`. About 10 seconds on
2 CPU cores, most of it loading the model here for the comparison. Needs `pip install openai`.
"""

import argparse

import numpy as np
from openai import OpenAI

import sbert

TEXTS = ["A man is eating food.", "Someone is eating a piece of bread.", "The sky is blue."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--api-key", default="none", help="the server's --api-key, if it has one")
    parser.add_argument("--model", default="default", help="the model the server serves")
    args = parser.parse_args()

    client = OpenAI(base_url=args.url, api_key=args.api_key)
    answer = client.embeddings.create(model=args.model, input=TEXTS)
    served = np.array([item.embedding for item in answer.data], dtype=np.float32)
    print(f"{len(served)} vectors of {served.shape[1]} dimensions; {answer.usage.total_tokens} tokens")
    print("cosine similarity of the first text with the others:", np.round(served[1:] @ served[0], 3))

    local = sbert.load(args.model).encode(TEXTS)
    print(f"largest difference from the library's own vectors: {np.abs(served - local).max():.1e}")


if __name__ == "__main__":
    main()
