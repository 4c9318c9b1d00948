from ipykeep.cli_fast import main

main()
