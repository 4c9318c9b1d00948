from ipykeep.cli import main

main()
