from ptmlab.cli import main

main()
