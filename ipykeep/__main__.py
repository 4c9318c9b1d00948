from ipykeep.cli.entry import main

main()
