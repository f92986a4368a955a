"""A run_code script: counts the words of the collected greeting."""


def run(given):
    with open("/loaded/collected/hello.txt") as f:
        words = f.read().split()
    return {"words": len(words), "args": given["args"]}
