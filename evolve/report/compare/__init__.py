"""`python benchmark.py`: every rule and champion scored on a split, by its kind of program (`table`), the rows, formats, verdict, tokens per second and concurrency."""
